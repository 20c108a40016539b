package wasm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/transformtest"
)

const (
	stateful = "testdata/stateful"
	count    = "../../examples/wasm/count"
)

// memStores is a transform.Stores in memory that knows only the stores it
// was made with, as the processor's does, and fails as told.
type memStores struct {
	stores map[string]*memStore
	err    error // returned by Store, e.g. a partition not restored
}

type memStore struct {
	mu      sync.Mutex
	m       map[string]memEntry
	getErr  error
	putErr  error
	gets    int
	writes  int
	expires map[string]time.Time
}

type memEntry struct {
	v   []byte
	exp time.Time
}

var errNotRestored = errors.New("state: partition not restored")

func newStores(names ...string) *memStores {
	s := &memStores{stores: map[string]*memStore{}}
	for _, n := range names {
		s.stores[n] = &memStore{m: map[string]memEntry{}}
	}
	return s
}

func (s *memStores) Store(name string) (transform.Store, error) {
	if s.err != nil {
		return nil, s.err
	}
	st, ok := s.stores[name]
	if !ok {
		return nil, fmt.Errorf("state: unknown store %q", name)
	}
	return st, nil
}

func (s *memStores) ctx() context.Context { return transform.WithStores(context.Background(), s) }

func (s *memStore) Get(key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.getErr != nil {
		return nil, false, s.getErr
	}
	e, ok := s.m[string(key)]
	return e.v, ok, nil
}

func (s *memStore) Put(key, value []byte, exp time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if s.putErr != nil {
		return s.putErr
	}
	s.m[string(key)] = memEntry{append([]byte{}, value...), exp}
	return nil
}

func (s *memStore) Delete(key []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	delete(s.m, string(key))
	return nil
}

func (s *memStore) get(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	return string(e.v), ok
}

// firstIdle returns the pool's first idle instance, or nil.
func firstIdle(tr *Transform) *instance {
	if l := idle(tr); len(l) > 0 {
		return l[0]
	}
	return nil
}

func withStores(v string) func(*Settings) { return func(s *Settings) { s.Stores = v } }

func keyed(k, v string) *kgo.Record {
	return &kgo.Record{Key: []byte(k), Value: []byte(v), Timestamp: time.UnixMilli(1_700_000_000_123)}
}

// The count example counts per key through the host functions: every
// key's outputs run 1, 2, 3, and the store holds the last count under
// the key's bytes behind a 0x00 byte, as aggregate's does.
func TestWasmStateCount(t *testing.T) {
	tr := newTest(t, count, withStores("counts"))
	if got := tr.Stores(); len(got) != 1 || got[0] != "counts" || !tr.Ordered() {
		t.Fatalf("Stores() = %v, Ordered() = %v", got, tr.Ordered())
	}
	st := newStores("counts")
	ctx := st.ctx()
	seen := map[string]int{}
	for i := range 30 {
		k := "k" + strconv.Itoa(i%4)
		if i == 7 {
			k = `q"<&>é`
		}
		rec := keyed(k, "x")
		rec.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}
		out, err := tr.Process(ctx, testSrc, rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[k]++
		want := fmt.Sprintf(`{"key":%s,"value":%d}`, jsonString(k), seen[k])
		if len(out) != 1 || string(out[0].Value) != want || string(out[0].Key) != k || len(out[0].Headers) != 1 {
			t.Fatalf("record %d: got %q, want %s", i, values(out), want)
		}
	}
	if v, ok := st.stores["counts"].get("\x00k1"); !ok || v != "8" {
		t.Errorf(`store "\x00k1" = %q, %v; want 8`, v, ok)
	}
	if _, err := tr.Process(ctx, testSrc, &kgo.Record{Value: []byte("x")}, nil); err == nil || !errors.Is(err, ErrGuest) {
		t.Errorf("a record without a key: %v", err)
	}
}

// jsonString is k as encoding/json writes it, for the few keys the tests
// use.
func jsonString(k string) string {
	r := strings.NewReplacer(`"`, `\"`, "<", `\u003c`, ">", `\u003e`, "&", `\u0026`)
	return `"` + r.Replace(k) + `"`
}

// Without STORES the transform is stateless, and a module importing the
// store functions is refused naming STORES; with it, the names are
// checked as the state package checks them.
func TestWasmStateSettings(t *testing.T) {
	module := guestPath(t, count)
	build := func(settings map[string]string) (*transform.Chain, error) {
		settings["MODULE"] = module
		return transformtest.Build("wasm", settings)
	}
	_, err := build(map[string]string{})
	if err == nil || !strings.Contains(err.Error(), "STORES") || !strings.Contains(err.Error(), "imports processor.store_") {
		t.Errorf("a module importing the store functions without STORES: %v", err)
	}
	for _, bad := range []string{"a,a", "a,,b", "bad name", "a/b", "ok,x:y", strings.Repeat("x", 201)} {
		_, err := build(map[string]string{"STORES": bad})
		var se *settings.Error
		if !errors.As(err, &se) || se.Field != "STORES" {
			t.Errorf("STORES=%q: %v, want a setting error", bad, err)
		}
	}
	chain, err := build(map[string]string{"STORES": "counts, other.v2_x-y"})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	if got := chain.Stores(); len(got) != 2 || got[0] != "counts" || got[1] != "other.v2_x-y" || !chain.Ordered() {
		t.Errorf("chain stores %v, ordered %v", got, chain.Ordered())
	}

	plain, err := transformtest.Build("wasm", map[string]string{"MODULE": guestPath(t, uppercase)})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.Stores() != nil || plain.Ordered() {
		t.Errorf("without STORES: stores %v, ordered %v", plain.Stores(), plain.Ordered())
	}
	// Stores the module does not use are allowed: they are the
	// processor's to keep.
	up, err := transformtest.Build("wasm", map[string]string{"MODULE": guestPath(t, uppercase), "STORES": "unused"})
	if err != nil {
		t.Fatal(err)
	}
	up.Close()
}

// A guest reads its own writes within the record, across its stores;
// the stores see them only when the record succeeds, in order.
func TestWasmStateReadYourWrites(t *testing.T) {
	tr := newTest(t, stateful, withStores("s0,s1"))
	st := newStores("s0", "s1")
	out, err := tr.Process(st.ctx(), testSrc, keyed("k", "rw"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `s0:"":false:<nil>;s0:"one":true:<nil>;s1:"":false:<nil>;s0:"":false:<nil>;s1:"other":true:<nil>;s0:"two":true:<nil>;`
	if string(out[0].Value) != want {
		t.Errorf("got  %s\nwant %s", out[0].Value, want)
	}
	if v, _ := st.stores["s0"].get("k"); v != "two" || st.stores["s0"].writes != 3 {
		t.Errorf("s0: %q after %d writes, want two after 3", v, st.stores["s0"].writes)
	}
	if v, _ := st.stores["s1"].get("k"); v != "other" {
		t.Errorf("s1: %q", v)
	}
	// Past the linear scan: the index of the record's writes.
	if _, err := tr.Process(st.ctx(), testSrc, keyed("k", "many:100"), nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.stores["s0"].get("m0"); ok {
		t.Error("m0 was deleted after its write")
	}
	if v, _ := st.stores["s0"].get("m99"); v != "99" {
		t.Errorf("m99 = %q", v)
	}
	// A value bigger than the SDK's first buffer: store_get says its
	// size, and the SDK asks again.
	out, err = tr.Process(st.ctx(), testSrc, keyed("big", "big:100000"), nil)
	if err != nil || string(out[0].Value) != "100000" {
		t.Fatalf("big: %q, %v", values(out), err)
	}
	out, err = tr.Process(st.ctx(), testSrc, keyed("big", "get"), nil)
	if err != nil || len(out[0].Value) != 100001 {
		t.Fatalf("big, next record: %d bytes, %v", len(out[0].Value), err)
	}
}

// The expiry is record time in Unix milliseconds; 0 is none.
func TestWasmStateExpiry(t *testing.T) {
	tr := newTest(t, stateful, withStores("s0"))
	st := newStores("s0")
	for _, c := range []struct {
		value string
		want  time.Time
	}{{"put:v:1700000060000", time.UnixMilli(1_700_000_060_000)}, {"put:v", time.Time{}}} {
		if _, err := tr.Process(st.ctx(), testSrc, keyed("k", c.value), nil); err != nil {
			t.Fatal(err)
		}
		if got := st.stores["s0"].m["k"].exp; !got.Equal(c.want) || got.IsZero() != c.want.IsZero() {
			t.Errorf("%s: expires %v, want %v", c.value, got, c.want)
		}
	}
}

// A record that fails, in the guest, in a trap or by its writes' size,
// changes no store; the instance is kept unless the guest trapped.
//
// No deadline: the writes' limit alone must end put-loop (the guest gives
// up by itself after 64 MiB), and a deadline would race it, as copying
// 16 MiB of writes on a loaded machine can outlast any per-record timeout.
func TestWasmStateFailedRecordWritesNothing(t *testing.T) {
	tr := newTest(t, stateful, withStores("s0"), func(s *Settings) { s.MaxMemory, s.Timeout = 16<<20, 0 })
	st := newStores("s0")
	for _, c := range []struct {
		value string
		is    error
		kept  bool
		text  string
	}{
		{"put-then-fail", ErrGuest, true, "failing after a write"},
		{"put-then-trap", ErrTrap, false, "trapped"},
		// The writes' limit is a store error, which the host reports
		// (the guest's own message only says ErrStore).
		{"put-loop", nil, true, `state store "s0": writing: one record's writes would hold more than 16777216 bytes, the instance's memory limit (MAX_MEMORY)`},
	} {
		t.Run(c.value, func(t *testing.T) {
			if _, err := tr.Process(st.ctx(), testSrc, keyed("k", "get"), nil); err != nil { // an instance in the pool
				t.Fatal(err)
			}
			before := firstIdle(tr)
			_, err := tr.Process(st.ctx(), testSrc, keyed("k", c.value), nil)
			if err == nil || c.is != nil && !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("got %v, want %v: %s", err, c.is, c.text)
			}
			if n := st.stores["s0"].writes; n != 0 {
				t.Errorf("the store saw %d writes of a failed record", n)
			}
			if kept := firstIdle(tr) == before; kept != c.kept {
				t.Errorf("instance kept %v, want %v", kept, c.kept)
			}
		})
	}
	// And the next record works, and writes.
	if out, err := tr.Process(st.ctx(), testSrc, keyed("k", "count"), nil); err != nil || string(out[0].Value) != "1" {
		t.Fatalf("after the failures: %q, %v", values(out), err)
	}
}

// Store errors reach the record's error, whatever the guest does with
// them, with errors.Is finding the store's error; the instance is kept.
func TestWasmStateStoreErrors(t *testing.T) {
	tr := newTest(t, stateful, withStores("s0,s1"))
	check := func(t *testing.T, ctx context.Context, value string, is error, text ...string) {
		t.Helper()
		before := firstIdle(tr)
		out, err := tr.Process(ctx, testSrc, keyed("k", value), nil)
		if err == nil {
			t.Fatalf("%s: succeeded with %q", value, values(out))
		}
		if is != nil && !errors.Is(err, is) {
			t.Errorf("%s: %v, want %v", value, err, is)
		}
		for _, s := range text {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q lacks %q", value, err, s)
			}
		}
		if firstIdle(tr) != before {
			t.Errorf("%s: the instance was discarded", value)
		}
	}
	st := newStores("s0", "s1")
	check(t, context.Background(), "count", transform.ErrNoStores, `state store "s0"`)
	st.err = errNotRestored
	check(t, st.ctx(), "count", errNotRestored, `state store "s0"`)
	st.err = nil
	st.stores["s0"].getErr = errors.New("disk on fire")
	check(t, st.ctx(), "count", nil, `state store "s0": reading: disk on fire`)
	st.stores["s0"].getErr = nil
	st.stores["s0"].putErr = errors.New("sealed")
	check(t, st.ctx(), "count", nil, `state store "s0": writing: sealed`)
	st.stores["s0"].putErr = nil
	check(t, st.ctx(), "bad-index", nil, "state store index 7: the module has 2 stores (STORES=s0,s1)")
	check(t, st.ctx(), "negative-index", nil, "state store index -1")
	check(t, st.ctx(), "unknown-store", ErrGuest, `state store "nope" is not declared`)
	delete(st.stores, "s1")
	check(t, st.ctx(), "rw", nil, `state store "s1": state: unknown store "s1"`)

	for name, want := range map[string]string{"s0": "0", "s1": "1", "nope": "-1", "": "-1"} {
		out, err := tr.Process(st.ctx(), testSrc, keyed(name, "index"), nil)
		if err != nil || string(out[0].Value) != want {
			t.Errorf("store_index(%q) = %q, %v; want %s", name, values(out), err, want)
		}
	}
}

// A guest passing addresses or lengths outside its memory to a host
// function is stopped: the record fails with ErrBadCall naming the
// function and the argument, the instance is discarded, the store is
// untouched, and the next record runs on a fresh instance.
func TestWasmStateHostileGuest(t *testing.T) {
	tr := newTest(t, stateful, withStores("s0"))
	st := newStores("s0")
	for value, want := range map[string]string{
		"index-bad-name": "processor.store_index: the name (address 4294967280, 64 bytes) is outside",
		"get-bad-key":    "processor.store_get: the key (address 4294967040, 1000 bytes) is outside",
		"get-huge-key":   "processor.store_get: the key (address",
		"get-bad-buf":    "processor.store_get: the value buffer (address 4294967280, 100 bytes) is outside",
		"get-huge-buf":   "processor.store_get: a value buffer of 4294967295 bytes",
		"put-bad-value":  "processor.store_put: the value (address 4294967280, 64 bytes) is outside",
		"put-huge-value": "processor.store_put: the value (address",
		"delete-bad-key": "processor.store_delete: the key (address 4294967295, 2 bytes) is outside",
	} {
		t.Run(value, func(t *testing.T) {
			_, err := tr.Process(st.ctx(), testSrc, keyed("k", value), nil)
			if err == nil || !errors.Is(err, ErrBadCall) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want ErrBadCall: %s", err, want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("a multi-line error: %q", err)
			}
			if len(idle(tr)) != 0 {
				t.Error("the instance was kept")
			}
			if out, err := tr.Process(st.ctx(), testSrc, keyed("k", "get"), nil); err != nil || string(out[0].Value) != "none" {
				t.Errorf("the next record: %q, %v", values(out), err)
			}
		})
	}
	if n := st.stores["s0"].writes; n != 0 {
		t.Errorf("%d writes reached the store", n)
	}
}

// Instances run concurrently, each record on its own stores.
func TestWasmStateConcurrent(t *testing.T) {
	tr := newTest(t, count, withStores("counts"))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			st := newStores("counts")
			ctx := st.ctx()
			for i := range 50 {
				out, err := tr.Process(ctx, testSrc, keyed("k", "x"), nil)
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf(`{"key":"k","value":%d}`, i+1); string(out[0].Value) != want {
					errs <- fmt.Errorf("worker %d: %s, want %s", w, out[0].Value, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkWasmState measures the count example per record, and one
// store_get or store_put host call (the record's cost divided among 1000
// calls, the guest's loop included) on an in-memory store, with a
// deadline and, for store_get, without.
func BenchmarkWasmState(b *testing.B) {
	src := record.Source{Topic: "orders", Partition: 3, Offset: 12345}
	b.Run("count", func(b *testing.B) {
		tr := newTest(b, count, withStores("counts"))
		ctx := newStores("counts").ctx()
		rec := &kgo.Record{}
		b.ReportAllocs()
		for b.Loop() {
			*rec = kgo.Record{Key: []byte("cust-98765"), Value: []byte("x")}
			if _, err := tr.Process(ctx, src, rec, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		op      string
		timeout time.Duration
	}{{"gets", time.Second}, {"puts", time.Second}, {"gets", 0}} {
		op := c.op
		name := op + "-per-call"
		if c.timeout == 0 {
			name += "-no-deadline"
		}
		b.Run(name, func(b *testing.B) {
			tr := newTest(b, stateful, withStores("s0"), func(s *Settings) { s.Timeout = c.timeout })
			st := newStores("s0")
			ctx := st.ctx()
			st.stores["s0"].m["cust-98765"] = memEntry{v: []byte("12345678")}
			rec := &kgo.Record{}
			b.ReportAllocs()
			for b.Loop() {
				*rec = kgo.Record{Key: []byte("cust-98765"), Value: []byte(op + ":1000")}
				if _, err := tr.Process(ctx, src, rec, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/call")
		})
	}
}

// A module with STATE_BY_KEY keeps its state by the record key: behind a
// stage that may change the key (another module), the processor
// repartitions by that key (Chain.Hop); at the chain's start it needs no
// hop. A module without STATE_BY_KEY names no group key and keeps its
// state by the input's partitions, as before: no hop.
func TestWasmStateHop(t *testing.T) {
	counter, upper := guestPath(t, count), guestPath(t, uppercase)
	for _, c := range []struct {
		entries []string
		byKey   string
		hop     bool
	}{
		{[]string{"wasm"}, "true", false},
		{[]string{"wasm"}, "false", false},
		{[]string{"wasm@upper", "wasm"}, "true", true},
		{[]string{"wasm@upper", "wasm"}, "false", false},
	} {
		var es []transform.Entry
		for _, e := range c.entries {
			en, err := transform.ParseEntry(e)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, en)
		}
		chain, err := transform.Default.Build(es, func(e transform.Entry, setting string) (string, bool) {
			switch {
			case e.Alias == "upper" && setting == "MODULE":
				return upper, true
			case e.Alias == "upper":
				return "", false
			case setting == "MODULE":
				return counter, true
			case setting == "STORES":
				return "counts", true
			case setting == "STATE_BY_KEY":
				return c.byKey, true
			}
			return "", false
		})
		if err != nil {
			t.Fatal(err)
		}
		at, e, ok := chain.Hop()
		if ok != c.hop || (ok && e.String() != "wasm") {
			t.Errorf("%v STATE_BY_KEY=%s: Hop() = %d, %s, %v; want %v", c.entries, c.byKey, at, e, ok, c.hop)
		}
		if ok {
			k, err := chain.GroupKeyerAt(at).GroupKey(t.Context(), &kgo.Record{Key: []byte("k1")})
			if err != nil || string(k) != "k1" {
				t.Errorf("GroupKey = %q, %v; want the record key", k, err)
			}
		}
		chain.Close()
	}
}
