package app

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/wasmtest"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/wasm"
)

// A wasm plugin runs in try as in the processor: the uppercase example,
// built and compiled ahead (package wasmtest), configured by
// PROCESSOR_WASM_MODULE.
func TestTryWasm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly guest")
	}
	dir := t.TempDir()
	module := filepath.Join(dir, "uppercase.wasm")
	if err := wasmtest.Build("../../../examples/wasm/uppercase", module, "-buildmode=c-shared"); err != nil {
		t.Fatal(err)
	}
	cache, err := wasmtest.NewCache(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Precompile(module, time.Second); err != nil {
		t.Fatal(err)
	}
	reg := &transform.Registry{}
	reg.Register("wasm", transform.Typed("", func(s *wasm.Settings) (transform.Transform, error) {
		return wasm.NewWithCache(s, cache.CompilationCache())
	}))
	env := map[string]string{"TRANSFORMS": "wasm", "WASM_MODULE": module, "WASM_TIMEOUT": "1s", "LINEAGE_HEADERS": "false"}
	lines, stderr, code := tryRun(t, reg, env, "k\thello\n")
	want := []tryLine{{Source: trySource{"try", 0, 0}, Outputs: []tryRecord{{Topic: "try-output", Key: str("k"), Value: str("HELLO"), Headers: []tryHeader{}}}}}
	if code != exitOK || asJSON(lines) != asJSON(want) {
		t.Errorf("exit %d, lines\n%s\nwant 0 and\n%s\nstderr %s", code, asJSON(lines), asJSON(want), stderr)
	}
}
