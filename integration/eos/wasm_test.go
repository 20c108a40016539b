package eos

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/testkit/wasmtest"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/wasm"
)

var (
	wasmOnce  sync.Once
	wasmPath  string
	wasmCache *wasmtest.Cache
	wasmErr   error
)

// uppercaseModule builds the uppercase example plugin once per test run,
// with the Go toolchain running the tests, compiles it ahead into
// wasmCache outside the race detector (see package wasmtest), and returns
// its path.
func uppercaseModule(t *testing.T) string {
	t.Helper()
	wasmOnce.Do(func() {
		dir, err := os.MkdirTemp("", "processor-wasm")
		if err != nil {
			wasmErr = err
			return
		}
		wasmPath = filepath.Join(dir, "uppercase.wasm")
		if wasmErr = wasmtest.Build("../../examples/wasm/uppercase", wasmPath, "-buildmode=c-shared"); wasmErr != nil {
			return
		}
		if wasmCache, wasmErr = wasmtest.NewCache(filepath.Join(dir, "cache")); wasmErr != nil {
			return
		}
		wasmErr = wasmCache.Precompile(wasmPath, time.Second)
	})
	if wasmErr != nil {
		t.Fatal(wasmErr)
	}
	return wasmPath
}

// wasmChain is a chain of one wasm transform running module, built from a
// registry of its own with the settings given directly, on the
// compilation cache of uppercaseModule.
func wasmChain(t *testing.T, module string) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("wasm", transform.Typed("", func(s *wasm.Settings) (transform.Transform, error) {
		return wasm.NewWithCache(s, wasmCache.CompilationCache())
	}))
	chain, err := reg.Build([]transform.Entry{{Name: "wasm"}}, itest.SettingsLookup(map[string]string{"MODULE": module, "MAX_MEMORY": "64MiB", "TIMEOUT": "1s"}))
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the instances start, so it runs after they stop.
	t.Cleanup(func() {
		if err := chain.Close(); err != nil {
			t.Error(err)
		}
	})
	return chain
}

// The uppercase WebAssembly plugin runs inside the exactly-once copy: two
// instances, one stopped mid-run, and a quarter of the transactions
// aborted on purpose, so records pass through the plugin more than once.
// A read_committed reader then finds every input upper-cased exactly once,
// in per-key order, with its key and lineage.
func TestWasmPluginExactlyOnce(t *testing.T) {
	t.Parallel()
	module := uppercaseModule(t)
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("wasm-in"), N: 20_000, Keys: 200}
		out, group := itest.Unique("wasm-out"), itest.Unique("wasm-group")
		tg.NewTopics(t, 6, in.Topic, out)
		tg.Produce(t, in, 0, in.N/2)

		abortEvery4th := func(seq uint64) bool { return seq%4 == 0 }
		o := itest.InstanceOpts{Group: group, Topics: []string{in.Topic}, Out: out, MaxRecords: 1000, InjectAbort: abortEvery4th}
		o.TxnID, o.Chain = group+"-a", wasmChain(t, module)
		a := tg.Start(t, o)
		o.TxnID, o.Chain = group+"-b", wasmChain(t, module)
		b := tg.Start(t, o)

		itest.WaitFor(t, 60*time.Second, "a third of the input to commit", func() bool { return itest.SumConsumed(a, b) >= uint64(in.N/3) })
		a.Stop(t)
		tg.Produce(t, in, in.N/2, in.N)
		tg.WaitCaughtUp(t, group, in.Topic, b)
		b.Stop(t)

		t.Logf("%s: %s", tg.Name, itest.FmtStats(a, b))
		if got := itest.SumConsumed(a, b); got != uint64(in.N) {
			t.Errorf("committed input records summed over instances = %d, want %d", got, in.N)
		}
		checkUppercasedExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}

// checkUppercasedExactlyOnce asserts that out holds every input's value
// upper-cased exactly once, with its key, per-key order and lineage.
func checkUppercasedExactlyOnce(t *testing.T, in itest.Input, out []*kgo.Record) {
	t.Helper()
	want := make(map[string]bool, in.N)
	for i := range in.N {
		want[strings.ToUpper(string(in.Record(i).Value))] = true
	}
	seen := make(map[string]int, in.N)
	lastSeq := map[string]int{}
	unexpected, dups, order, badKey, badLineage := 0, 0, 0, 0, 0
	for _, r := range out {
		v := string(r.Value)
		if !want[v] {
			unexpected++
			continue
		}
		if seen[v]++; seen[v] > 1 {
			dups++
			continue
		}
		k, s, _ := strings.Cut(v, ":") // "K<key>:<seq>"
		if string(r.Key) != strings.ToLower(k) {
			badKey++
		}
		if src, ok := check.Lineage(r); !ok || src.Topic != in.Topic {
			badLineage++
		}
		seq, _ := strconv.Atoi(s)
		if last, ok := lastSeq[k]; ok && seq != last+1 {
			order++
		}
		lastSeq[k] = seq
	}
	lost := in.N - len(seen)
	if unexpected > 0 || dups > 0 || lost > 0 || order > 0 || badKey > 0 || badLineage > 0 || len(out) != in.N {
		t.Errorf("exactly-once through the wasm plugin violated: %d outputs for %d inputs, %d not an upper-cased input, %d duplicates, %d lost, %d per-key order breaks, %d wrong keys, %d without lineage",
			len(out), in.N, unexpected, dups, lost, order, badKey, badLineage)
	}
}
