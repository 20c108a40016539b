// Package shape holds the repository's size rules as a test: no non-test
// Go file over 500 lines and no non-test function over 80, in the
// processor, its tools and its benchmarks alike. A file or function past
// them does more than one thing; split it by concern.
package shape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	maxFileLines = 500
	maxFuncLines = 80
)

// sources returns the non-test Go files of the module, relative to its
// root, skipping testdata and hidden folders.
func sources(t *testing.T) (root string, files []string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root %s has no go.mod: %v", root, err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || name == "bin" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return root, files
}

// TestSizes fails for every non-test file over maxFileLines lines and
// every function (or method) over maxFuncLines lines.
func TestSizes(t *testing.T) {
	root, files := sources(t)
	if len(files) < 50 {
		t.Fatalf("found only %d Go files under %s; the walk is broken", len(files), root)
	}
	fset := token.NewFileSet()
	for _, rel := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s has %d lines, over %d: split it by concern", rel, n, maxFileLines)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.Body.End()).Line
			if n := end - start + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s has %d lines, over %d", rel, start, fn.Name.Name, n, maxFuncLines)
			}
		}
	}
}
