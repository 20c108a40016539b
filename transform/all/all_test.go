package all_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/all"
)

// registers finds a transform's registration in a package's code.
var registers = regexp.MustCompile(`transform\.Register\("([^"]+)"`)

// builtIns reads the packages under transform/ (as the go command sees
// them: no ., _ or testdata directories) whose code, tests aside,
// registers a transform, and returns their import paths and the names
// they register.
func builtIns(t *testing.T) (pkgs, names []string) {
	t.Helper()
	root := ".."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == root {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found := registers.FindAllStringSubmatch(string(src), -1)
		for _, m := range found {
			names = append(names, m[1])
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if len(found) > 0 && err == nil {
			pkgs = append(pkgs, "github.com/streamproc/processor/transform/"+filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pkgs)
	slices.Sort(names)
	return slices.Compact(pkgs), names
}

// all.go imports, blank, every package under transform/ that registers a
// transform, and nothing else: a new built-in fails here until its line
// is added.
func TestImportsEveryBuiltIn(t *testing.T) {
	pkgs, _ := builtIns(t)
	if !slices.Contains(pkgs, "github.com/streamproc/processor/transform/identity") {
		t.Fatalf("found the transform packages %q, without identity", pkgs)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "all.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var imported []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if imp.Name == nil || imp.Name.Name != "_" {
			t.Errorf("all.go imports %s by name; a built-in needs a blank import", path)
		}
		imported = append(imported, path)
	}
	slices.Sort(imported)
	if !slices.Equal(imported, pkgs) {
		t.Errorf("all.go imports %q, want the packages that register a transform, %q", imported, pkgs)
	}
}

// Importing all registers every built-in transform: the names the
// packages under transform/ register, and no other.
func TestRegistersEveryBuiltIn(t *testing.T) {
	_, want := builtIns(t)
	if len(want) == 0 {
		t.Fatal("no package under transform/ registers a transform")
	}
	if got := transform.Default.Names(); !slices.Equal(got, want) {
		t.Errorf("registered %q, want %q", got, want)
	}
}
