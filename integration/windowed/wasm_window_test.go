package windowed

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/testkit/wasmtest"
)

// The windowcount example WebAssembly plugin, its store emitting on
// close (PROCESSOR_WASM_EMIT_STORES), run by the processor binary fed
// live, killed with SIGKILL and restarted with aborted transactions, and
// read as a backlog by another group, writes the same final rows byte
// for byte (key, value, timestamp, lineage): exactly one per key and
// window that closed, none for a window still open, each the count of
// its inputs that were not late, as the reference model of windows
// computes from the input (closeRef, which holds aggregate's EMIT=close
// to it too).
func TestWasmWindowsCloseUnderKillAndBacklog(t *testing.T) {
	t.Parallel()
	module := filepath.Join(t.TempDir(), "windowcount.wasm")
	if err := wasmtest.Build("../../examples/wasm/windowcount", module, "-buildmode=c-shared"); err != nil {
		t.Fatal(err)
	}
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := windowInputs("wasm-wclose-in")
		settings := map[string]string{"PROCESSOR_WASM_MODULE": module, "PROCESSOR_WASM_STORES": "windows",
			"PROCESSOR_WASM_EMIT_STORES": "windows", "PROCESSOR_WASM_TIMEOUT": "1s"}
		live, back := killAndBacklogChain(t, tg, "wasm-wclose", in, []string{"wasm"}, settings)
		want, lates := closeRef(tg.ReadAll(t, in[0].Topic, true), time.Minute.Milliseconds(), (10 * time.Second).Milliseconds())
		checkFinalRows(t, live, back, want)
		if len(live.late)+len(back.late) != 0 {
			t.Errorf("%d and %d records in the late topics: a plugin drops its late records", len(live.late), len(back.late))
		}
		if lates == 0 || len(want) < 100 {
			t.Errorf("%d late inputs and %d closed windows: the test shows too little", lates, len(want))
		}
		t.Logf("%s: %d inputs, %d closed windows, %d late", tg.Name, len(in), len(want), lates)
	})
}
