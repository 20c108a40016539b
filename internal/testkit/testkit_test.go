// Package testkit holds the helpers that only tests use, apart from the
// product's packages: kafkatest (kfake and real-Kafka clusters for
// tests), pgtest (a PostgreSQL for tests), wasmtest (WebAssembly plugins
// built and compiled ahead for tests), interop (Confluent's Python
// serializers), itest (the harness of the integration tests under
// integration/) and repo (the checkout's files, for pgtest and interop).
// This test keeps them apart: no non-test Go file of the
// module outside internal/testkit imports one.
package testkit_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// prefix is the import path of the test-only helpers.
const prefix = "github.com/streamproc/processor/internal/testkit/"

func TestOnlyTestsImportTheTestkit(t *testing.T) {
	root := filepath.Join("..", "..")
	here := filepath.Join(root, "internal", "testkit")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == here || path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir // the helpers themselves, and what the go command leaves out
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, prefix) {
				t.Errorf("%s imports the test-only %s; only tests and internal/testkit may", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d non-test files of the module, want them all", checked)
	}
}
