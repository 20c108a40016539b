package integration

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/wasmtest"
	"github.com/streamproc/processor/state"
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
	if err := wasmtest.Build("../examples/wasm/count", module, "-buildmode=c-shared"); err != nil {
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
			forEachTarget(t, func(t *testing.T, tg *target) {
				in := input{topic: unique("wasm-count-in"), n: 6000, keys: 60}
				out, group := unique("wasm-count-out"), unique("wasm-count-group")
				tg.createTopics(t, 4, in.topic, out)
				set := stateful(t.TempDir(), ordering, "0.2", []string{"wasm"}, plugin)
				static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
				tg.produce(t, in, 0, in.n/3)
				p1 := tg.startBinary(t, group, group+"-1", in.topic, out, set, static)
				waitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.committedAt().IsZero() })
				fed := make(chan struct{})
				go func() {
					defer close(fed)
					for i := in.n / 3; i < 2*in.n/3; i += in.n / 30 {
						if t.Context().Err() != nil || !tg.produce(t, in, i, min(i+in.n/30, 2*in.n/3)) {
							return
						}
						time.Sleep(30 * time.Millisecond)
					}
				}()
				time.Sleep(time.Second)
				p1.kill(t)
				changelog := len(tg.readAll(t, state.ChangelogTopic(group, "counts"), true))

				p2 := tg.startBinary(t, group, group+"-1", in.topic, out, set, static)
				waitClosed(t, fed, feedTimeout, "the input feeder")
				tg.produce(t, in, 2*in.n/3, 3*in.n/4) // after the start: p2 has work
				tg.waitCaughtUp(t, group, in.topic)
				waitFor(t, 10*time.Second, "a commit of p2", func() bool { return !p2.committedAt().IsZero() })
				p2.terminate(t)
				if n, _ := restored(p2); n >= changelog && changelog > 0 {
					t.Errorf("the restore after SIGKILL read %d changelog records of %d: not only the tail", n, changelog)
				} else {
					t.Logf("%s: restore after SIGKILL read %d of the changelog's %d records", tg.Name, n, changelog)
				}

				wiped := stateful(t.TempDir(), ordering, "0.2", []string{"wasm"}, plugin)
				p3 := tg.startBinary(t, group, group+"-1", in.topic, out, wiped, static)
				tg.produce(t, in, 3*in.n/4, in.n)
				tg.waitCaughtUp(t, group, in.topic)
				waitFor(t, 10*time.Second, "a commit of p3", func() bool { return !p3.committedAt().IsZero() })
				p3.terminate(t)
				if _, rebuilt := restored(p3); !rebuilt {
					t.Error("a wiped state directory was not rebuilt from the changelog")
				}
				checkCounts(t, in, tg.readAll(t, out, true))
			})
		})
	}
}
