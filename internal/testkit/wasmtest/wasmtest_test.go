package wasmtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Precompile fills the cache directory that wazero in this process reads
// (the one named after the version it finds for itself), one entry per
// call timeout kind: were the helper to name another version, the tests
// would compile every guest again under the race detector.
func TestPrecompileFillsThisProcesssCache(t *testing.T) {
	dir := t.TempDir()
	module := filepath.Join(dir, "uppercase.wasm")
	if err := Build("../../../examples/wasm/uppercase", module, "-buildmode=c-shared"); err != nil {
		t.Fatal(err)
	}
	c, err := NewCache(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CompilationCache().Close(t.Context())
	entries := func() int {
		es, err := os.ReadDir(filepath.Join(dir, "cache", "wazero-"+wazeroVersion()+"-"+runtime.GOARCH+"-"+runtime.GOOS))
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	if n := entries(); n != 0 {
		t.Fatalf("a new cache holds %d entries", n)
	}
	for range 2 { // the second time, nothing new
		if err := c.Precompile(module, time.Second, 0); err != nil {
			t.Fatal(err)
		}
		if n := entries(); n != 2 {
			t.Errorf("the cache holds %d compiled modules, want 2 (with and without a deadline)", n)
		}
	}
}
