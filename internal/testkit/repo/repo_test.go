package repo

import (
	"os"
	"strings"
	"testing"
)

// Path finds the checkout's go.mod, the module's, and the scripts pgtest
// and interop run.
func TestPathFindsTheCheckout(t *testing.T) {
	mod, err := os.ReadFile(Path(t, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(mod), "module github.com/streamproc/processor\n") {
		t.Fatalf("go.mod at %s is not the module's: %.60q", Path(t, "go.mod"), mod)
	}
	for _, p := range [][]string{{"integration", "postgres", "pg.sh"}, {"integration", "registry", "interop"}} {
		if _, err := os.Stat(Path(t, p...)); err != nil {
			t.Error(err)
		}
	}
}
