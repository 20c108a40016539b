package wasm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/aggregate"
)

const windowcount = "../../examples/wasm/windowcount"

func withEmit(stores, emit string) func(*Settings) {
	return func(s *Settings) { s.Stores, s.EmitStores = stores, emit }
}

// closeRun runs recs, one partition's in offset order, through tr as the
// processor does: each record with the stream time as of it, and after
// each the entries of store whose expiry that time reached deleted and
// closed in order of (expiry, key). It returns what they emitted, as
// "key value ts=<ms> src=<offset>", and how many windows closed.
func closeRun(t *testing.T, tr transform.Transform, store string, recs []*kgo.Record) ([]string, int) {
	t.Helper()
	st := &timedStores{memStores: newStores(store), ms: -1}
	ctx := transform.WithStores(context.Background(), st)
	w := tr.(transform.WindowEmitter)
	ms := st.stores[store]
	var got []string
	closed := 0
	for i, r := range recs {
		st.ms = max(st.ms, r.Timestamp.UnixMilli())
		in := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
		out, err := tr.Process(ctx, record.Source{Topic: "in", Offset: int64(i)}, in, nil)
		if err != nil || len(out) != 0 {
			t.Fatalf("record %d: %d outputs, %v; want none", i, len(out), err)
		}
		var due []string
		for k, e := range ms.m {
			if !e.exp.IsZero() && e.exp.UnixMilli() <= st.ms {
				due = append(due, k)
			}
		}
		slices.SortFunc(due, func(a, b string) int {
			if c := ms.m[a].exp.Compare(ms.m[b].exp); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		for _, k := range due {
			e := ms.m[k]
			delete(ms.m, k)
			out, off, err := w.Closed(ctx, transform.Closing{Store: store, Topic: "in", Key: []byte(k), Value: e.v, Expiry: e.exp}, nil)
			if err != nil {
				t.Fatalf("closing %q: %v", k, err)
			}
			for _, o := range out {
				got = append(got, fmt.Sprintf("%q %s ts=%d src=%d", o.Key, o.Value, o.Timestamp.UnixMilli(), off.Offset))
			}
			closed++
		}
	}
	return got, closed
}

// The windowcount example, run through the wasm runtime with its store
// emitting on close, emits what aggregate emits with FUNCTION=count,
// WINDOW=1m, GRACE=10s and EMIT=close, in the same order: one final row
// per key and window once it closes, stamped with the window's last
// millisecond, with the lineage of its last input; late inputs count
// nowhere. Keys of any bytes.
func TestClosedWindowCountAsAggregate(t *testing.T) {
	tr := newTest(t, windowcount, withEmit("windows", "windows"))
	if !tr.EmitsOnClose("windows") || !transform.EmitsOnClose(tr) {
		t.Fatal("EMIT_STORES=windows does not emit on close")
	}
	ref, err := aggregate.New(&aggregate.Settings{Function: "count", Window: time.Minute, Grace: 10 * time.Second, Emit: "close", Store: "windows"})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(40, 1))
	keys := []string{"a", "b", `q"<&>é`, "\xff\x00bin", "", "k5"}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var recs []*kgo.Record
	late := 0
	stream := int64(0)
	for i := range 600 {
		ts := base + int64(i)*700
		if r.IntN(6) == 0 {
			ts -= int64(r.IntN(90_000))
		}
		if stream = max(stream, ts); ts-ts%60_000+70_000 <= stream {
			late++
		}
		recs = append(recs, &kgo.Record{Key: []byte(keys[r.IntN(len(keys))]), Value: []byte("{}"), Timestamp: time.UnixMilli(ts)})
	}
	got, n := closeRun(t, tr, "windows", recs)
	want, _ := closeRun(t, ref, "windows", recs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("windowcount emitted\n%s\naggregate emitted\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n != len(got) || n < 30 || late < 10 {
		t.Fatalf("%d windows closed with %d rows, %d late inputs: the test shows too little", n, len(got), late)
	}
	t.Logf("%d windows closed, %d late inputs; first row %s", n, late, got[0])
}

// processor_closed gets the entry, its store, expiry, partition and
// stream time; its outputs keep their order, their headers and routes,
// and are stamped as the guest says (the expiry unless it says), with
// the lineage it names.
func TestClosedOutputs(t *testing.T) {
	tr := newTest(t, stateful, withEmit("s0,s1", "s0"))
	if !tr.EmitsOnClose("s0") || tr.EmitsOnClose("s1") {
		t.Fatalf("EMIT_STORES=s0: s0 %v, s1 %v", tr.EmitsOnClose("s0"), tr.EmitsOnClose("s1"))
	}
	ctx := transform.WithStores(context.Background(), &timedStores{memStores: newStores("s0", "s1"), ms: 5000})
	c := transform.Closing{Store: "s0", Topic: "orders", Partition: 3, Key: []byte("k"), Value: []byte("emit:3:42"), Expiry: time.UnixMilli(4000)}
	prior := []*kgo.Record{{Value: []byte("before")}}
	out, off, err := tr.Closed(ctx, c, prior)
	if err != nil || len(out) != 4 || off.Offset != 42 || out[0] != prior[0] {
		t.Fatalf("emit:3:42: %d outputs, offset %d, %v", len(out), off.Offset, err)
	}
	for i, o := range out[1:] {
		ts := int64(1000 + i)
		if i == 0 {
			ts = 4000
		}
		if string(o.Key) != "k" || string(o.Value) != fmt.Sprint(i) || o.Timestamp.UnixMilli() != ts || o.Topic != "" ||
			len(o.Headers) != 1 || o.Headers[0].Key != "store" || string(o.Headers[0].Value) != "s0" {
			t.Errorf("output %d: %+v; want key k, value %d, stamped %d, header store=s0", i, o, i, ts)
		}
	}
	c.Value = []byte("describe")
	out, off, err = tr.Closed(ctx, c, nil)
	if want := "s0 orders/3/-1 expiry=4000 stream=5000 host=5000"; err != nil || len(out) != 1 || string(out[0].Value) != want || out[0].Topic != "elsewhere" || off.Offset != -1 {
		t.Fatalf("describe: %v, offset %d, %v; want %q to topic elsewhere", out, off.Offset, err, want)
	}
	c.Value = []byte("emit:0:7")
	if out, off, err = tr.Closed(ctx, c, nil); err != nil || len(out) != 0 || off.Offset != 7 {
		t.Fatalf("emit:0:7: %d outputs, offset %d, %v", len(out), off.Offset, err)
	}
}

// A close that fails fails with the reason and appends nothing: the
// guest's error keeps the instance; a trap, the deadline and malformed
// output discard it, and the next close gets a fresh one; the stores
// are out of reach while closing; an output to the input's own topic or
// stamped before 1970 is refused; a store that does not emit is an
// error.
func TestClosedFailures(t *testing.T) {
	tr := newTest(t, stateful, withEmit("s0,s1", "s0"), func(s *Settings) { s.Timeout = 200 * time.Millisecond })
	ctx := transform.WithStores(context.Background(), &timedStores{memStores: newStores("s0", "s1"), ms: 5000})
	for _, tc := range []struct {
		value, want string
		is          error
		discarded   bool
	}{
		{"fail", "failing a closed entry", ErrGuest, false},
		{"trap", "out of bounds", ErrTrap, true},
		{"loop", "TIMEOUT=200ms", ErrTimeout, true},
		{"store", `state store "s0": not reachable from processor_closed`, nil, false},
		{"negative-time", "negative timestamp -5", ErrGuest, false},
		{"own-topic", `names its input topic "orders"`, nil, false},
	} {
		before := firstIdle(tr)
		prior := []*kgo.Record{{Value: []byte("before")}}
		c := transform.Closing{Store: "s0", Topic: "orders", Key: []byte("k"), Value: []byte(tc.value), Expiry: time.UnixMilli(4000)}
		out, off, err := tr.Closed(ctx, c, prior)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `closing an entry of store "s0"`) ||
			(tc.is != nil && !errors.Is(err, tc.is)) || len(out) != 1 || off.Offset != -1 {
			t.Errorf("%s: %d outputs, offset %d, %v; want %q", tc.value, len(out), off.Offset, err, tc.want)
		}
		if kept := firstIdle(tr) == before; kept == tc.discarded {
			t.Errorf("%s: instance kept %v, want %v", tc.value, kept, !tc.discarded)
		}
		c.Value = []byte("emit:1:9")
		if out, off, err := tr.Closed(ctx, c, nil); err != nil || len(out) != 1 || off.Offset != 9 {
			t.Errorf("after %s: %d outputs, offset %d, %v", tc.value, len(out), off.Offset, err)
		}
	}
	if _, _, err := tr.Closed(ctx, transform.Closing{Store: "s1", Key: []byte("k"), Value: []byte("emit:1:1")}, nil); err == nil ||
		!strings.Contains(err.Error(), "does not emit") {
		t.Errorf("closing an entry of s1, which does not emit: %v", err)
	}
}

// EMIT_STORES names stores of STORES, each once, and needs a module
// exporting processor_closed; without it nothing emits on close.
func TestEmitStoresSetting(t *testing.T) {
	for _, tc := range []struct{ pkg, stores, emit, want string }{
		{stateful, "s0", "s1", `"s1" is not one of the STORES setting's "s0"`},
		{stateful, "s0", "s0,s0", `"s0" is named twice`},
		{stateful, "", "s0", "not one of the STORES"},
		{"testdata/garbage", "s0", "s0", "does not export processor_closed"},
	} {
		s := &Settings{Module: guestPath(t, tc.pkg), MaxMemory: 64 << 20, Timeout: time.Second, Stores: tc.stores, EmitStores: tc.emit}
		tr, err := newTransform(s, testCache)
		if err == nil {
			tr.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "EMIT_STORES") && !strings.Contains(err.Error(), "MODULE") {
			t.Errorf("STORES=%s EMIT_STORES=%s on %s: %v; want %q", tc.stores, tc.emit, tc.pkg, err, tc.want)
		}
	}
	tr := newTest(t, stateful, withStores("s0"))
	if tr.EmitsOnClose("s0") || transform.EmitsOnClose(tr) {
		t.Error("without EMIT_STORES, s0 emits on close")
	}
}
