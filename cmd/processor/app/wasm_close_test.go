package app

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/testkit/wasmtest"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/wasm"
)

// A wasm stage whose stores emit on close (PROCESSOR_WASM_EMIT_STORES)
// runs without a repartition hop; behind one (its state kept by the
// record key, which an earlier stage may change) it is refused naming
// its own variable (Prepare, pipeline.StateHopClose).
func TestPrepareWasmEmitBehindHop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds WebAssembly guests")
	}
	dir := t.TempDir()
	up, wc := filepath.Join(dir, "uppercase.wasm"), filepath.Join(dir, "windowcount.wasm")
	for pkg, out := range map[string]string{"uppercase": up, "windowcount": wc} {
		if err := wasmtest.Build("../../../examples/wasm/"+pkg, out, "-buildmode=c-shared"); err != nil {
			t.Fatal(err)
		}
	}
	base := map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out",
		"WASM_MODULE": wc, "WASM_STORES": "windows", "WASM_EMIT_STORES": "windows", "WASM_TIMEOUT": "1s", "WASM_UP_MODULE": up}
	for _, c := range []struct{ transforms, byKey, want string }{
		{"wasm", "false", ""},
		{"wasm@up,wasm", "false", ""}, // state by the input's partitions: no hop
		{"wasm@up,wasm", "true", `PROCESSOR_WASM_EMIT_STORES="windows" is invalid: want unset for wasm, which runs after wasm repartitions the records: emitting on close needs no hop in this release`},
	} {
		for k, v := range base {
			t.Setenv(config.EnvName(k), v)
		}
		t.Setenv(config.EnvName("TRANSFORMS"), c.transforms)
		t.Setenv(config.EnvName("WASM_STATE_BY_KEY"), c.byKey)
		cfg, err := config.Load("h")
		if err != nil {
			t.Fatal(err)
		}
		chains, err := buildChains(transform.Default, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{})
		chains[0].Close()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s, STATE_BY_KEY=%s: got %v, want %q", c.transforms, c.byKey, err, c.want)
		}
	}
}
