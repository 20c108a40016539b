package stateful

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

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
				set := itest.Stateful(t.TempDir(), ordering, "0.2", []string{"wasm"}, plugin)
				static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
				tg.Produce(t, in, 0, in.N/3)
				p1 := tg.StartBinary(t, group, group+"-1", in.Topic, out, set, static)
				itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
				fed := make(chan struct{})
				go func() {
					defer close(fed)
					for i := in.N / 3; i < 2*in.N/3; i += in.N / 30 {
						if t.Context().Err() != nil || !tg.Produce(t, in, i, min(i+in.N/30, 2*in.N/3)) {
							return
						}
						time.Sleep(30 * time.Millisecond)
					}
				}()
				time.Sleep(time.Second)
				p1.Kill(t)
				changelog := len(tg.ReadAll(t, state.ChangelogTopic(group, "counts"), true))

				p2 := tg.StartBinary(t, group, group+"-1", in.Topic, out, set, static)
				itest.WaitClosed(t, fed, itest.FeedTimeout, "the input feeder")
				tg.Produce(t, in, 2*in.N/3, 3*in.N/4) // after the start: p2 has work
				tg.WaitCaughtUp(t, group, in.Topic)
				itest.WaitFor(t, 10*time.Second, "a commit of p2", func() bool { return !p2.CommittedAt().IsZero() })
				p2.Terminate(t)
				if n, _ := itest.Restored(p2); n >= changelog && changelog > 0 {
					t.Errorf("the restore after SIGKILL read %d changelog records of %d: not only the tail", n, changelog)
				} else {
					t.Logf("%s: restore after SIGKILL read %d of the changelog's %d records", tg.Name, n, changelog)
				}

				wiped := itest.Stateful(t.TempDir(), ordering, "0.2", []string{"wasm"}, plugin)
				p3 := tg.StartBinary(t, group, group+"-1", in.Topic, out, wiped, static)
				tg.Produce(t, in, 3*in.N/4, in.N)
				tg.WaitCaughtUp(t, group, in.Topic)
				itest.WaitFor(t, 10*time.Second, "a commit of p3", func() bool { return !p3.CommittedAt().IsZero() })
				p3.Terminate(t)
				if _, rebuilt := itest.Restored(p3); !rebuilt {
					t.Error("a wiped state directory was not rebuilt from the changelog")
				}
				checkCounts(t, in, tg.ReadAll(t, out, true))
			})
		})
	}
}
