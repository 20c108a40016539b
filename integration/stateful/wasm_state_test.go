package stateful

import (
	"path/filepath"
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/testkit/wasmtest"
)

// The count example WebAssembly plugin counts per key through its state
// store exactly once, as aggregate does (TestStatefulCountUnderCrash):
// the processor binary runs it with PROCESSOR_WASM_STORES=counts through
// a SIGKILL mid-run, a SIGTERM, injected aborts and a wiped state
// directory, under both orderings, and every key's counts run 1, 2, 3,
// ... in the committed output with no repeat and no gap. The restore
// after the SIGKILL reads at most the changelog's tail; the wiped
// directory is rebuilt from it.
func TestWasmStateCountUnderCrash(t *testing.T) {
	t.Parallel()
	module := filepath.Join(t.TempDir(), "count.wasm")
	if err := wasmtest.Build("../../examples/wasm/count", module, "-buildmode=c-shared"); err != nil {
		t.Fatal(err)
	}
	plugin := map[string]string{
		"PROCESSOR_WASM_MODULE":       module,
		"PROCESSOR_WASM_STORES":       "counts",
		"PROCESSOR_WASM_STATE_BY_KEY": "true", // the count plugin keys its store by the record key
		"PROCESSOR_WASM_TIMEOUT":      "1s",   // a loaded machine is no guest's fault
	}
	for _, ordering := range []string{"partition", "key"} {
		t.Run(ordering, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				in := itest.Input{Topic: itest.Unique("wasm-count-in"), N: 6000, Keys: 60}
				out, group := itest.Unique("wasm-count-out"), itest.Unique("wasm-count-group")
				tg.NewTopics(t, 4, in.Topic, out)
				run := &countRun{tg: tg, in: in, out: out, group: group, store: "counts",
					set: itest.Stateful(t.TempDir(), ordering, "0.2", []string{"wasm"}, plugin)}
				run.killMidFeed(t)
				run.wiped(t, itest.Stateful(t.TempDir(), ordering, "0.2", []string{"wasm"}, plugin), 3*in.N/4)
			})
		})
	}
}
