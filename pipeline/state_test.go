package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/aggregate"
	"github.com/streamproc/processor/txn"
)

// memState is a State in memory: what Commit applied survives a new
// pipeline, what a transaction wrote before an abort does not.
type memState struct {
	mu        sync.Mutex
	committed map[string][]byte // "store/partition/key"
	restores  int
	ready     map[int32]bool
	// expireBytes is the tombstone key bytes each Expire call claims to
	// write (at most its maxBytes); expired holds the sum of a committed
	// transaction's, one entry a commit.
	expireBytes int
	expired     []int
}

func newMemState() *memState {
	return &memState{committed: map[string][]byte{}, ready: map[int32]bool{}}
}

func (s *memState) Begin() (StateTxn, error) {
	return &memStateTxn{s: s, writes: map[string][]byte{}}, nil
}

func (s *memState) Restore(_ context.Context, parts []int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restores++
	for _, p := range parts {
		s.ready[p] = true
	}
	return nil
}

func (s *memState) Status() any { return nil }

func (s *memState) Topics() []string { return []string{"changelog"} }

func (s *memState) Journal(func(string) int) StateJournal { return &memJournal{} }

// memJournal journals the writes of memStateStores.
type memJournal struct {
	undo  []func()
	bytes int64 // key and value bytes written since the last Mark
}

func (j *memJournal) Store(t StateTxn, name string, p int32) (transform.Store, error) {
	st, err := t.Store(name, p)
	if err != nil {
		return nil, err
	}
	s := st.(*memStateStore)
	return &memStateStore{t: s.t, prefix: s.prefix, j: j}, nil
}

func (j *memJournal) Mark() int64 {
	n := j.bytes
	j.undo, j.bytes = j.undo[:0], 0
	return n
}

func (j *memJournal) Undo() {
	for i := len(j.undo) - 1; i >= 0; i-- {
		j.undo[i]()
	}
	j.undo, j.bytes = j.undo[:0], 0
}

func (s *memState) Revoke(parts []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range parts {
		delete(s.ready, p)
	}
}

type memStateTxn struct {
	s       *memState
	mu      sync.Mutex
	writes  map[string][]byte
	expired int // the tombstone bytes of its Expire calls
}

type memStateStore struct {
	t      *memStateTxn
	prefix string
	j      *memJournal // nil: not journaled
}

// note journals k's value in the transaction before a write; st.t.mu is held.
func (st *memStateStore) note(k string) {
	if st.j == nil {
		return
	}
	old, had := st.t.writes[k]
	st.j.undo = append(st.j.undo, func() {
		st.t.mu.Lock()
		defer st.t.mu.Unlock()
		if had {
			st.t.writes[k] = old
		} else {
			delete(st.t.writes, k)
		}
	})
}

func (t *memStateTxn) Store(name string, p int32) (transform.Store, error) {
	t.s.mu.Lock()
	ready := t.s.ready[p]
	t.s.mu.Unlock()
	if !ready {
		return nil, fmt.Errorf("partition %d not restored", p)
	}
	return &memStateStore{t: t, prefix: fmt.Sprintf("%s/%d/", name, p)}, nil
}

func (t *memStateTxn) Expire(_ context.Context, _ string, p int32, _ time.Time, _, maxBytes int) (int, int, error) {
	t.s.mu.Lock()
	ready := t.s.ready[p]
	t.s.mu.Unlock()
	if !ready { // as *state.Manager's
		return 0, 0, fmt.Errorf("partition %d not restored", p)
	}
	n := t.s.expireBytes
	if maxBytes > 0 {
		n = min(n, maxBytes)
	}
	t.expired += n
	return 0, n, nil
}

func (t *memStateTxn) ExpireEach(ctx context.Context, store string, p int32, now time.Time, limit, maxBytes int, _ func([]byte, []byte, time.Time) error) (int, int, error) {
	return t.Expire(ctx, store, p, now, limit, maxBytes)
}

func (t *memStateTxn) Records() []*kgo.Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	var recs []*kgo.Record
	for k, v := range t.writes {
		recs = append(recs, &kgo.Record{Topic: "changelog", Key: []byte(k), Value: v})
	}
	return recs
}

func (t *memStateTxn) Commit() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for k, v := range t.writes {
		t.s.committed[k] = v
	}
	t.s.expired = append(t.s.expired, t.expired)
	return nil
}

func (t *memStateTxn) Abort() {}

func (st *memStateStore) Get(key []byte) ([]byte, bool, error) {
	st.t.mu.Lock()
	v, ok := st.t.writes[st.prefix+string(key)]
	st.t.mu.Unlock()
	if ok {
		return v, true, nil
	}
	st.t.s.mu.Lock()
	defer st.t.s.mu.Unlock()
	v, ok = st.t.s.committed[st.prefix+string(key)]
	return v, ok, nil
}

func (st *memStateStore) Put(key, value []byte, _ time.Time) error {
	st.t.mu.Lock()
	defer st.t.mu.Unlock()
	st.note(st.prefix + string(key))
	if st.j != nil {
		st.j.bytes += int64(len(key) + len(value))
	}
	st.t.writes[st.prefix+string(key)] = append([]byte(nil), value...)
	return nil
}

func (st *memStateStore) Delete(key []byte) error {
	st.t.mu.Lock()
	defer st.t.mu.Unlock()
	st.note(st.prefix + string(key))
	delete(st.t.writes, st.prefix+string(key))
	return nil
}

// countChain is the aggregate transform counting by record key.
func countChain(t *testing.T) *transform.Chain { return builtinChain(t, "aggregate") }

// builtinChain builds the chain of the named built-ins, closed when t ends.
func builtinChain(t *testing.T, names ...string) *transform.Chain {
	t.Helper()
	var entries []transform.Entry
	for _, n := range names {
		entries = append(entries, transform.Entry{Name: n})
	}
	c, err := transform.Default.Build(entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// checkCounts checks that the committed outputs count every key 1, 2, 3,
// ... in order, with no repeat and no gap, up to its number of inputs.
func checkCounts(t *testing.T, e *loopEnv) {
	t.Helper()
	want := map[string]int{}
	for _, r := range e.inputs {
		want[string(r.Key)]++
	}
	got := counted(t, e)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("key %s: counted %d of %d inputs", k, got[k], n)
		}
	}
}

// counted reads the committed counts of e's output, keyed by their
// record key, and fails the test on a count that is not the one after
// its key's last.
func counted(t *testing.T, e *loopEnv) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range e.read(e.out, true) {
		var v struct {
			Key   string `json:"key"`
			Value int    `json:"value"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if v.Key != string(r.Key) || v.Value != got[v.Key]+1 {
			t.Fatalf("key %s: count %d after %d (a failed attempt's write stood?)", r.Key, v.Value, got[v.Key])
		}
		got[v.Key] = v.Value
	}
	return got
}

func TestStatefulCountsExactUnderAbortsAndRestarts(t *testing.T) {
	for _, ordering := range []Ordering{OrderPartition, OrderKey} {
		t.Run(string(ordering), func(t *testing.T) {
			e := newMemEnv(t)
			e.mem.Create("changelog", loopPartitions, 0)
			st := newMemState()
			workers := []*transform.Chain{countChain(t)}
			e.produce(300, 7)
			o := Options{State: st, Ordering: ordering, Chains: workers, MaxRecordsPerTxn: 40,
				InjectAbort: func(seq uint64) bool { return seq%3 == 0 }}
			run := e.start("g", "t1", countChain(t), o)
			eventually(t, 20*time.Second, "the first inputs committed", run, func() bool { return e.caughtUp("g") })
			run.stop(t, 10*time.Second)
			e.produce(200, 7) // a restart goes on from the committed counts
			o.Chains = []*transform.Chain{countChain(t)}
			run = e.start("g", "t1", countChain(t), o)
			eventually(t, 20*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
			run.stop(t, 10*time.Second)
			checkCounts(t, e)
			if len(e.read("changelog", true)) == 0 {
				t.Error("no changelog record was committed")
			}
			if st.restores < 2 {
				t.Errorf("restored %d times, want one per start at least", st.restores)
			}
		})
	}
}

// A change of the assignment while records flow makes the loop restore
// every partition between transactions (aborting the open one when it
// polled records meanwhile), and no record runs on a partition not
// restored: the counts stay exact.
func TestStatefulRestoresOnAssignmentChange(t *testing.T) {
	e := newMemEnv(t)
	e.mem.Create("changelog", loopPartitions, 0)
	st := newMemState()
	e.produce(200, 5)
	run := e.start("g", "t1", countChain(t), Options{State: st, MaxRecordsPerTxn: 20, Chains: []*transform.Chain{countChain(t)}})
	ms := run.s.(*memkafka.Session)
	restores := func() int {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.restores
	}
	eventually(t, 10*time.Second, "a first commit", run, func() bool { return run.p.Stats().Commits > 0 })
	base := restores()
	for i := range 10 {
		e.produce(50, 5)
		ms.Rebalance()
		eventually(t, 10*time.Second, "a restore after rebalance "+fmt.Sprint(i+1), run, func() bool { return restores() > base+i })
	}
	eventually(t, 20*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	checkCounts(t, e)
}

// A rebalance that lands between a poll and the loop's look at it, while
// no transaction is open, takes a partition whose records the poll holds:
// the state, restored for the new assignment, has not that partition, so
// the poll is rewound by an abort (the new owner reads those records)
// rather than run into a store or an expiry that is not there, which
// stopped the processor. The other partitions go on, counted exactly.
func TestStatefulPartitionRevokedAfterPoll(t *testing.T) {
	e := newMemEnv(t)
	e.mem.Create("changelog", loopPartitions, 0)
	st := newMemState()
	e.produce(60, 6)
	run := e.start("g", "t1", countChain(t), Options{State: st, MaxRecordsPerTxn: 20, Chains: []*transform.Chain{countChain(t)}})
	ms := run.s.(*memkafka.Session)
	eventually(t, 10*time.Second, "the first input committed", run, func() bool { return e.caughtUp("g") })
	revoked := int32(0) // the first a poll takes records of
	ms.RevokeAfterPoll(revoked)
	e.produce(60, 6)
	eventually(t, 10*time.Second, "the revoke", run, func() bool { return !ms.RevokePending() })
	committed := func() map[int32]int64 { return e.committedOffsets("g") }
	end := func(p int32) int64 {
		return e.mem.End(e.in, p)
	}
	eventually(t, 10*time.Second, "the partitions left committed", run, func() bool {
		c := committed()
		for p := range int32(loopPartitions) {
			if p != revoked && c[p] < end(p) {
				return false
			}
		}
		return true
	})
	run.stop(t, 10*time.Second)
	if got := ms.Metrics().Aborted.WithLabelValues(string(txn.ReasonRebalance)); testutil.ToFloat64(got) < 1 {
		t.Errorf("no abort with reason rebalance: the poll holding the revoked partition's records was not rewound")
	}
}

// flakyAfterState is a stage for after a stateful one: on its first
// attempt of every input whose offset is 1 mod 5 it fails retriably, and
// it fails every input whose offset is 4 mod 13 for good.
type flakyAfterState struct{ tried sync.Map }

func (f *flakyAfterState) Process(_ context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	switch {
	case src.Offset%13 == 4:
		return out, fmt.Errorf("offset %d is refused", src.Offset)
	case src.Offset%5 == 1:
		if _, again := f.tried.LoadOrStore(src, true); !again {
			return out, transform.Retriable(fmt.Errorf("offset %d: try again", src.Offset))
		}
	}
	return append(out, rec), nil
}

func init() {
	transform.Register("statetestdrop", transform.Plain("drops every record", func() (transform.Transform, error) {
		return transform.Func(func(_ context.Context, _ record.Source, _ *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			return out, nil
		}), nil
	}))
	transform.Register("statetestflaky", transform.Plain("fails some records after a stateful stage", func() (transform.Transform, error) {
		return &flakyAfterState{}, nil
	}))
}

// A stage after a stateful one that fails a record (retriably, then it
// succeeds; or for good, so it is dead-lettered) leaves the state as if
// the failed attempt had not run: a retried input counts once, a
// dead-lettered one not at all. Without the journal the first counted
// twice and the second once, with no output to show for it.
func TestStatefulUndoesFailedRecords(t *testing.T) {
	for _, ordering := range []Ordering{OrderPartition, OrderKey} {
		t.Run(string(ordering), func(t *testing.T) {
			e := newMemEnv(t)
			e.mem.Create("changelog", loopPartitions, 0)
			st := newMemState()
			build := func() *transform.Chain { return builtinChain(t, "aggregate", "statetestflaky") }
			e.produce(400, 7)
			run := e.start("g", "t1", build(), Options{State: st, Ordering: ordering, Chains: []*transform.Chain{build()},
				MaxRecordsPerTxn: 50, OnError: DeadLetter, DLQTopic: e.dlq, MaxRetries: 3})
			eventually(t, 20*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
			run.stop(t, 10*time.Second)

			want := map[string]int{}
			for _, r := range e.inputs {
				want[string(r.Key)]++
			}
			dead := e.read(e.dlq, true)
			for _, d := range dead {
				want[string(d.Key)]--
			}
			if len(dead) == 0 {
				t.Fatal("no input was dead-lettered: the test fails nothing")
			}
			got := counted(t, e)
			for k, n := range want {
				if got[k] != n {
					t.Errorf("key %s: counted %d, want %d (its inputs less its dead letters)", k, got[k], n)
				}
			}
		})
	}
}

// The state a record writes counts towards MaxTxnBytes like its outputs:
// a chain that writes state and emits nothing still ends its
// transactions at the byte bound.
func TestStateBytesBoundTransactions(t *testing.T) {
	e := newMemEnv(t)
	e.mem.Create("changelog", loopPartitions, 0)
	c := builtinChain(t, "aggregate", "statetestdrop")
	e.produce(300, 300)
	// A count write is about 5 bytes of key (a prefix byte and k0 to
	// k299) and 1 of value: 400 bytes are some 70 records.
	run := e.start("g", "t1", c, Options{State: newMemState(), MaxTxnBytes: 400, MaxRecordsPerTxn: 100000, CommitInterval: time.Hour})
	eventually(t, 20*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	if n := run.p.Stats().Commits; n < 300/75 {
		t.Errorf("%d commits for 300 inputs writing about 6 bytes of state each under a 400-byte bound, want at least %d", n, 300/75)
	}
}

// The tombstones of expired entries count towards MaxTxnBytes and stay
// within what it leaves of a transaction: with every Expire call claiming
// 150 bytes (three partitions a poll) and a 400-byte bound, no committed
// transaction's expiry passes 400 bytes, and expiry alone ends
// transactions (the chain writes no state).
func TestStateExpiryBoundedByTxnBytes(t *testing.T) {
	e := newMemEnv(t)
	e.mem.Create("changelog", loopPartitions, 0)
	c := builtinChain(t, "statetestdrop", "aggregate")
	e.produce(300, 300)
	st := newMemState()
	st.expireBytes = 150
	run := e.start("g", "t1", c, Options{State: st, MaxTxnBytes: 400, MaxRecordsPerTxn: 100000, CommitInterval: time.Hour})
	eventually(t, 20*time.Second, "every input committed", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.expired) == 0 {
		t.Fatal("no transaction committed")
	}
	for i, n := range st.expired {
		if n > 400 {
			t.Errorf("transaction %d wrote %d bytes of tombstones, over the 400-byte bound", i, n)
		}
	}
}

// A changelog record the cluster refuses for good (here larger than the
// changelog topic takes, a limit the journal did not know) is no input's
// doing: the processor stops with a *StateWriteError naming the topic
// instead of aborting the same transaction over and over.
func TestStateWriteRefusedStops(t *testing.T) {
	e := newMemEnv(t)
	e.mem.Create("changelog", loopPartitions, 200)
	recs := []*kgo.Record{{Topic: e.in, Key: []byte(strings.Repeat("k", 300)), Value: []byte("v")}}
	e.produceInputs(recs)
	run := e.start("g", "t1", countChain(t), Options{State: newMemState()})
	err := waitDone(t, run, 20*time.Second, "a changelog record was refused")
	var we *StateWriteError
	if !errors.As(err, &we) || we.Topic != "changelog" || !strings.Contains(err.Error(), "changelog") {
		t.Fatalf("Run returned %v, want a *StateWriteError naming the changelog", err)
	}
	if n := run.p.Stats().Commits; n != 0 {
		t.Errorf("%d commits, want none: the transaction with the refused write may not commit", n)
	}
}
