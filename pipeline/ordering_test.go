package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// orderLog is what the instances of an ordered test transform saw: per
// group (a key, or a partition), the input offsets in the order they ran
// and the instances that ran them, and how many records ran at once.
type orderLog struct {
	group func(record.Source, *kgo.Record) string
	delay time.Duration
	// fail, when set, fails a record's attempt with its error.
	fail func(record.Source) error

	mu      sync.Mutex
	seen    map[string][]int64
	by      map[string]map[int]bool
	running map[string]int // per group, its records running now
	overlap int            // records that began while another of their group ran

	inside, most atomic.Int64

	// inFlight, when above 0, makes the transform declare it
	// (transform.Concurrent); partRunning and partMost count, per input
	// partition, its records running now and the most at once.
	inFlight    int
	partRunning map[int32]int
	partMost    map[int32]int
}

// concurrentFunc is an ordered transform.Func that declares how many
// records of a partition it may run at once.
type concurrentFunc struct {
	orderedFunc
	n int
}

func (f concurrentFunc) InFlight() int { return f.n }

func newOrderLog(group func(record.Source, *kgo.Record) string) *orderLog {
	return &orderLog{group: group, seen: map[string][]int64{}, by: map[string]map[int]bool{}, running: map[string]int{},
		partRunning: map[int32]int{}, partMost: map[int32]int{}}
}

// byKey groups records by key, the null key as one group of its own.
func byKey(_ record.Source, r *kgo.Record) string {
	if r.Key == nil {
		return "<null>"
	}
	return "k=" + string(r.Key)
}

// byPartition groups records by input partition.
func byPartition(src record.Source, _ *kgo.Record) string {
	return "p=" + strconv.Itoa(int(src.Partition))
}

// chains returns n ordered chains, instances 0 to n-1, that log to l.
func (l *orderLog) chains(t *testing.T, n int) (*transform.Chain, []*transform.Chain) {
	var cs []*transform.Chain
	for id := range n {
		fn := func(_ context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			g := l.group(src, r)
			l.mu.Lock()
			if l.running[g]++; l.running[g] > 1 {
				l.overlap++
			}
			l.seen[g] = append(l.seen[g], src.Offset)
			if l.by[g] == nil {
				l.by[g] = map[int]bool{}
			}
			l.by[g][id] = true
			l.partRunning[src.Partition]++
			l.partMost[src.Partition] = max(l.partMost[src.Partition], l.partRunning[src.Partition])
			l.mu.Unlock()
			now := l.inside.Add(1)
			for m := l.most.Load(); now > m && !l.most.CompareAndSwap(m, now); m = l.most.Load() {
			}
			time.Sleep(l.delay)
			l.inside.Add(-1)
			l.mu.Lock()
			l.running[g]--
			l.partRunning[src.Partition]--
			l.mu.Unlock()
			if l.fail != nil {
				if err := l.fail(src); err != nil {
					return out, err
				}
			}
			return append(out, r), nil
		}
		reg := &transform.Registry{}
		reg.Register("ordered", transform.Plain("", func() (transform.Transform, error) {
			if l.inFlight > 0 {
				return concurrentFunc{orderedFunc(fn), l.inFlight}, nil
			}
			return orderedFunc(fn), nil
		}))
		c, err := reg.Build([]transform.Entry{{Name: "ordered"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Ordered() {
			t.Fatal("a chain of an ordered transform is not ordered")
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs[0], cs[1:]
}

// check fails t unless every group of inputs ran in input order on one
// instance (for a bounded chain, inFlight: one at a time): each record after the group's previous one, or at or before
// it where an attempt began again (a retry, an aborted transaction), never
// skipping one; and the group's last input ran.
func (l *orderLog) check(t *testing.T, inputs []*kgo.Record) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	want := map[string][]int64{}
	for _, r := range inputs {
		g := l.group(record.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, r)
		want[g] = append(want[g], r.Offset)
	}
	if l.overlap > 0 {
		t.Errorf("%d records began while another of their group ran", l.overlap)
	}
	for g, offs := range want {
		next := map[int64]int64{}
		for i := 1; i < len(offs); i++ {
			next[offs[i-1]] = offs[i]
		}
		seen := l.seen[g]
		if len(seen) == 0 || seen[0] != offs[0] || !containsOffset(seen, offs[len(offs)-1]) {
			t.Errorf("group %s: ran %v, want its inputs %v from the first to the last", g, abbrev(seen), abbrev(offs))
			continue
		}
		for i := 1; i < len(seen); i++ {
			if a, b := seen[i-1], seen[i]; b > a && b != next[a] {
				t.Errorf("group %s: offset %d ran right after %d, want %d (ran %v)", g, b, a, next[a], abbrev(seen))
				break
			}
		}
		// A bounded chain's keys are dealt by load, poll by poll
		// (lanes.go): a key may run on another instance in the next poll,
		// never on two within one (TestDealByLoad), and never two of its
		// records at once (overlap).
		if len(l.by[g]) != 1 && l.inFlight == 0 {
			t.Errorf("group %s ran on instances %v, want one", g, l.by[g])
		}
	}
}

func containsOffset(offs []int64, o int64) bool {
	for _, x := range offs {
		if x == o {
			return true
		}
	}
	return false
}

// abbrev shows at most the first 20 offsets.
func abbrev(offs []int64) string {
	if len(offs) <= 20 {
		return fmt.Sprint(offs)
	}
	return fmt.Sprint(offs[:20]) + fmt.Sprintf("... (%d)", len(offs))
}

// singlePartitionInput makes e's input topic one partition of n records
// of keys keys, every nullEvery-th with a null key (0: none).
func singlePartitionInput(e *loopEnv, n, keys, nullEvery int) {
	e.mem.Create(e.in, 1, 0)
	recs := make([]*kgo.Record, n)
	nulls := 0
	for i := range recs {
		if nullEvery > 0 && i%nullEvery == 0 {
			recs[i] = &kgo.Record{Value: []byte("null:" + strconv.Itoa(nulls))}
			nulls++
			continue
		}
		k, v := loopValue(i, keys)
		recs[i] = &kgo.Record{Key: []byte(k), Value: []byte(v)}
	}
	e.produceInputs(recs)
}

// runOrdered runs the ordered chains of l on e's input with workers
// workers under ordering until every input is committed, and checks the
// output and what the instances saw.
func runOrdered(t *testing.T, e *loopEnv, l *orderLog, workers int, o Options) {
	t.Helper()
	chain, more := l.chains(t, workers)
	o.Chains = more
	if o.MaxRecordsPerTxn == 0 {
		o.MaxRecordsPerTxn = 400
	}
	run := e.start("g", "g-a", chain, o)
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
	l.check(t, e.inputs)
}

// Under OrderKey, one partition's records run on several workers at once,
// each key's records (and the null-key records) in input order on one
// instance.
func TestOrderKeySinglePartition(t *testing.T) {
	e := newMemEnv(t)
	singlePartitionInput(e, 3000, 40, 7)
	l := newOrderLog(byKey)
	l.delay = 100 * time.Microsecond
	runOrdered(t, e, l, 4, Options{Lineage: true, Ordering: OrderKey})
	if got := l.most.Load(); got < 2 {
		t.Errorf("at most %d records of the one partition ran at once, want several", got)
	}
	if len(l.seen) != 41 {
		t.Errorf("%d groups ran, want 40 keys and the null key", len(l.seen))
	}
}

// Under OrderPartition, a partition's records run in offset order on one
// instance, partitions in parallel; one partition runs on one worker.
func TestOrderPartition(t *testing.T) {
	e := newMemEnv(t)
	e.produce(1500, 30)
	l := newOrderLog(byPartition)
	l.delay = 100 * time.Microsecond
	runOrdered(t, e, l, 3, Options{Lineage: true, Ordering: OrderPartition})

	e = newMemEnv(t)
	singlePartitionInput(e, 500, 10, 0)
	l = newOrderLog(byPartition)
	runOrdered(t, e, l, 3, Options{Lineage: true})
	if got := l.most.Load(); got != 1 {
		t.Errorf("%d records of the one partition ran at once, want 1", got)
	}
}

// Retries and aborted transactions run records again in the same order on
// the same instances, and the outputs stay exactly once and in order.
func TestOrderKeyRetriesAndAborts(t *testing.T) {
	for _, ordering := range []Ordering{OrderKey, OrderPartition} {
		t.Run(string(ordering), func(t *testing.T) {
			e := newMemEnv(t)
			singlePartitionInput(e, 2000, 25, 11)
			l := newOrderLog(byKey)
			var mu sync.Mutex
			tried := map[int64]bool{}
			l.fail = func(src record.Source) error {
				mu.Lock()
				defer mu.Unlock()
				if src.Offset%37 == 0 && !tried[src.Offset] {
					tried[src.Offset] = true
					return transform.Retriable(errors.New("the first attempt fails"))
				}
				return nil
			}
			var aborted atomic.Int64
			inject := func(seq uint64) bool {
				if seq%3 == 0 {
					aborted.Add(1)
					return true
				}
				return false
			}
			runOrdered(t, e, l, 3, Options{Lineage: true, Ordering: ordering, MaxRecordsPerTxn: 150, MaxRetries: 2, InjectAbort: inject})
			if aborted.Load() == 0 {
				t.Error("no transaction was aborted")
			}
		})
	}
}

// A chain that is not ordered still shares one partition's records among
// the workers in runs under OrderKey.
func TestOrderKeyStatelessChainShared(t *testing.T) {
	e := newMemEnv(t)
	e.noLineage = true
	singlePartitionInput(e, 1000, 10, 0)
	var inside, most atomic.Int64
	mk := func() *transform.Chain {
		return chainOf(t, "plain", func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			now := inside.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			time.Sleep(100 * time.Microsecond)
			inside.Add(-1)
			return append(out, r), nil
		})
	}
	chain := mk()
	if chain.Ordered() {
		t.Fatal("a chain of a plain function is ordered")
	}
	run := e.start("g", "g-a", chain, Options{Chains: []*transform.Chain{mk()}, Ordering: OrderKey, MaxRecordsPerTxn: 400})
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
	if got := most.Load(); got != 2 {
		t.Errorf("at most %d records of the one partition ran at once, want 2", got)
	}
}

// A chain that declares how many records of a partition it may run at once
// (transform.Concurrent, the http transform's MAX_IN_FLIGHT) has each
// partition's records dealt by key to that many of the workers: with more
// workers than that, no partition has more records running at once, every
// key's records run in order one at a time, and the partitions together
// use more of the workers.
func TestOrderKeyInFlightLanes(t *testing.T) {
	for _, lanes := range []int{1, 3} {
		t.Run(strconv.Itoa(lanes), func(t *testing.T) {
			e := newMemEnv(t)
			e.produce(1500, 60)
			l := newOrderLog(byKey)
			l.delay = 300 * time.Microsecond
			l.inFlight = lanes
			runOrdered(t, e, l, 8, Options{Lineage: true, Ordering: OrderKey})
			l.mu.Lock()
			defer l.mu.Unlock()
			if len(l.partMost) < 2 {
				t.Fatalf("records of %d partitions ran, want several", len(l.partMost))
			}
			for p, most := range l.partMost {
				if most > lanes {
					t.Errorf("partition %d: %d records ran at once, want at most %d (InFlight)", p, most, lanes)
				}
			}
			if got := l.most.Load(); got <= int64(lanes) {
				t.Errorf("at most %d records of all partitions ran at once, want more than one partition's %d", got, lanes)
			}
		})
	}
}

// Without a declared bound, key ordering deals a partition's records to
// all the workers.
func TestOrderKeyAllLanes(t *testing.T) {
	e := newMemEnv(t)
	singlePartitionInput(e, 1500, 60, 0)
	l := newOrderLog(byKey)
	l.delay = 300 * time.Microsecond
	runOrdered(t, e, l, 6, Options{Lineage: true, Ordering: OrderKey})
	if got := l.partMost[0]; got <= 3 {
		t.Errorf("at most %d records of the partition ran at once on 6 workers, want more than 3", got)
	}
}
