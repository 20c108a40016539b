package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/wasmtest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/wasm"
	"github.com/streamproc/processor/txn"
)

// guest is a Go guest built as a WASI reactor, compiled ahead into a
// wazero compilation cache outside the race detector (see package
// wasmtest): compiled under it, once for each chain, the guests of these
// tests took minutes of the package's 5-minute test timeout on a loaded
// 2-core machine.
type guest struct {
	path  string
	cache *wasmtest.Cache
}

// buildGuest builds the Go guest pkg (relative to this package) into a
// directory of the test's and compiles it ahead for the transform's
// TIMEOUT timeout.
func buildGuest(t *testing.T, pkg string, timeout time.Duration) *guest {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.Base(pkg)+".wasm")
	if err := wasmtest.Build(pkg, path, "-buildmode=c-shared"); err != nil {
		t.Fatal(err)
	}
	cache, err := wasmtest.NewCache(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the chains' cleanups, so it runs after them.
	t.Cleanup(func() { _ = cache.CompilationCache().Close(context.Background()) })
	if err := cache.Precompile(path, timeout); err != nil {
		t.Fatal(err)
	}
	return &guest{path: path, cache: cache}
}

// chain is a chain of one wasm transform with the settings set, on g's
// compilation cache; MODULE is g's.
func (g *guest) chain(t *testing.T, set map[string]string) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("wasm", transform.Typed("", func(s *wasm.Settings) (transform.Transform, error) {
		return wasm.NewWithCache(s, g.cache.CompilationCache())
	}))
	c, err := reg.Build([]transform.Entry{{Name: "wasm"}}, func(_ transform.Entry, k string) (string, bool) {
		if k == "MODULE" {
			return g.path, true
		}
		v, ok := set[k]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openStateFor opens state stores for group in a directory of the
// test's, with their changelogs on e's cluster.
func (e *loopEnv) openStateFor(group string, stores ...string) *state.Manager {
	e.t.Helper()
	m, err := state.Open(state.Options{Dir: e.t.TempDir(), Group: group, Stores: stores, ClientOpts: e.c.ClientOpts()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = m.Close() })
	if err := m.EnsureChangelogs(context.Background(), e.adm, loopPartitions); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// runStateful runs chain over what is in the input topic as group,
// until it has caught up, with state stores stores.
func (e *loopEnv) runStateful(group string, chain func() *transform.Chain, o Options, stores ...string) {
	e.t.Helper()
	m := e.openStateFor(group, stores...)
	o.State, o.Lineage = realState{m}, true
	o.Chains = []*transform.Chain{chain()}
	p := e.startWith(group, "t-"+group, chain(), o, func(so *txn.Options) {
		so.ClientOpts = append(so.ClientOpts, kgo.RecordPartitioner(state.Partitioner(kgo.StickyKeyPartitioner(nil), m.Topics())))
	})
	eventually(e.t, 90*time.Second, group+" caught up", p, func() bool { return e.caughtUp(group) })
	p.stop(e.t, 10*time.Second)
}

// The windowcount example WebAssembly plugin, its store emitting on
// close (EMIT_STORES), writes through the processor the same final rows,
// byte for byte (key, value, timestamp, lineage), as aggregate with
// WINDOW=1m, GRACE=10s, EMIT=close: one per key and window closed, in
// the transaction that deleted the window's entry. The same whatever the
// batching: in one run with large transactions, in transactions bounded
// so small that closes are put off, with every fifth aborted, and in two
// runs, the second restoring the open windows from the changelogs.
func TestWasmClosedAsAggregate(t *testing.T) {
	e := newLoopEnv(t)
	outs := []string{"out-wasm", "out-bound", "out-restart"}
	e.c.CreateTopics(t, loopPartitions, nil, outs...)
	g := buildGuest(t, "../examples/wasm/windowcount", 2*time.Second)
	r := rand.New(rand.NewPCG(40, 7))
	base := time.Now().Add(-5 * time.Hour).Truncate(time.Minute)
	var in []*kgo.Record
	for i := range 1600 {
		ts := base.Add(time.Duration(i) * 900 * time.Millisecond)
		if r.IntN(6) == 0 {
			ts = ts.Add(-time.Duration(r.IntN(80)) * time.Second)
		}
		in = append(in, &kgo.Record{Topic: e.in, Partition: int32(r.IntN(loopPartitions)), Key: []byte("k" + strconv.Itoa(r.IntN(30))),
			Value: []byte("{}"), Timestamp: ts})
	}
	half := len(in) / 2
	e.produceInputs(in[:half], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	agg := func() *transform.Chain {
		return settingsChain(t, map[string]string{"WINDOW": "1m", "GRACE": "10s", "EMIT": "close"}, "aggregate")
	}
	wasm := func() *transform.Chain {
		return g.chain(t, map[string]string{"STORES": "windows", "EMIT_STORES": "windows", "TIMEOUT": "2s"})
	}
	e.runStateful("restart", wasm, Options{OutputTopic: "out-restart", MaxRecordsPerTxn: 200}, "windows")
	e.produceInputs(in[half:], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e.runStateful("restart", wasm, Options{OutputTopic: "out-restart", MaxRecordsPerTxn: 200}, "windows")
	e.runStateful("agg", agg, Options{OutputTopic: e.out, MaxRecordsPerTxn: 100000}, "aggregate")
	e.runStateful("wasm", wasm, Options{OutputTopic: "out-wasm", MaxRecordsPerTxn: 100000}, "windows")
	e.runStateful("bound", wasm, Options{OutputTopic: "out-bound", MaxRecordsPerTxn: 50, MaxTxnBytes: 3000,
		InjectAbort: func(seq uint64) bool { return seq%5 == 0 }}, "windows")
	want := finals(e, e.out)
	for _, out := range outs {
		got := finals(e, out)
		for k, rows := range got {
			if len(rows) != 1 {
				t.Errorf("%s: window %s: %d final rows: %v", out, k, len(rows), rows)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %d final rows differ from aggregate's %d", out, len(got), len(want))
		}
	}
	if len(want) < 300 {
		t.Errorf("only %d windows closed: the test shows too little", len(want))
	}
	t.Logf("%d final rows", len(want))
}

// A guest that traps in processor_closed fails the close as a record
// fails: under dead_letter the entry goes to the dead-letter topic with
// the reason, once, and is deleted; the other entries emit, the
// processor goes on, and a second run over the same group has nothing
// left to close or to dead-letter.
func TestWasmClosedTrapDeadLetters(t *testing.T) {
	e := newLoopEnv(t)
	g := buildGuest(t, "../transform/wasm/testdata/stateful", 2*time.Second)
	base := time.Now().Add(-time.Hour).UnixMilli()
	var in []*kgo.Record
	for p := range int32(loopPartitions) {
		for i, v := range []string{"put:trap:%d", "put:emit:%d", "put:kept"} {
			in = append(in, &kgo.Record{Topic: e.in, Partition: p, Key: []byte(fmt.Sprintf("k%d-%d", p, i)),
				Value: []byte(fmt.Sprintf(v, base+1000)), Timestamp: time.UnixMilli(base)})
		}
		in = append(in, &kgo.Record{Topic: e.in, Partition: p, Key: []byte("later"), Value: []byte("get"), Timestamp: time.UnixMilli(base + 5000)})
	}
	e.produceInputs(in, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	chain := func() *transform.Chain {
		return g.chain(t, map[string]string{"STORES": "s0", "EMIT_STORES": "s0", "TIMEOUT": "2s"})
	}
	o := Options{OutputTopic: e.out, OnError: DeadLetter, DLQTopic: e.dlq}
	e.runStateful("g", chain, o, "s0")
	e.runStateful("g", chain, o, "s0")
	dead := e.read(e.dlq, true)
	if len(dead) != loopPartitions {
		t.Fatalf("%d dead letters, want %d (one per partition's trapping entry)", len(dead), loopPartitions)
	}
	for _, d := range dead {
		msg, _ := header(d, record.HeaderError)
		if !strings.HasPrefix(string(d.Key), "k") || !strings.HasSuffix(string(d.Key), "-0") || string(d.Value) != "trap" ||
			!strings.Contains(msg, `closing an entry of store "s0"`) || !strings.Contains(msg, "wasm guest trapped") || d.Timestamp.UnixMilli() != base+1000 {
			t.Errorf("dead letter %q=%q at %d: %s", d.Key, d.Value, d.Timestamp.UnixMilli(), msg)
		}
	}
	closed := 0
	for _, r := range e.read(e.out, true) {
		if string(r.Value) == "0" {
			closed++
			if !strings.HasSuffix(string(r.Key), "-1") || r.Timestamp.UnixMilli() != base+1000 {
				t.Errorf("closed output %q stamped %d", r.Key, r.Timestamp.UnixMilli())
			}
		}
	}
	if closed != loopPartitions {
		t.Errorf("%d outputs of closed entries, want %d", closed, loopPartitions)
	}
}
