// Package repo finds the project's own files (the scripts under
// integration/ that pgtest and interop run) from the testkit's source,
// whatever folder go test runs a test in.
package repo

import (
	"path/filepath"
	"runtime"
	"testing"
)

// Path returns the path of elem, joined, in the project's checkout: found
// from this package's source file (runtime.Caller), which stands three
// folders below the checkout's root. It fails the test when the source's
// place is unknown.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("repo: cannot tell where the project's source is")
	}
	return filepath.Join(append([]string{filepath.Dir(file), "..", "..", ".."}, elem...)...)
}
