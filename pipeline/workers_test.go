package pipeline

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// The loop tests again with two workers: every policy, retry, watchdog,
// poison and produce-failure case behaves as with one, and every output is
// still exactly once and in per-key order.
func TestLoopWithWorkers(t *testing.T) {
	loopWorkers = 2
	defer func() { loopWorkers = 1 }()
	for name, test := range workerCases() {
		t.Run(name, test)
	}
}

// The loop tests again with two workers and an ordered chain, under each
// ordering: the same outcomes, and the transform's records dealt to the
// workers by partition or by key.
func TestLoopWithWorkersOrdered(t *testing.T) {
	loopWorkers = 2
	defer func() { loopWorkers, loopOrdering = 1, "" }()
	for _, o := range []Ordering{OrderPartition, OrderKey} {
		loopOrdering = o
		for name, test := range workerCases() {
			t.Run(string(o)+"/"+name, test)
		}
	}
}

// workerCases are the loop tests that TestLoopWithWorkers runs again.
func workerCases() map[string]func(*testing.T) {
	return map[string]func(*testing.T){
		"ExactlyOnce":               TestLoopExactlyOnce,
		"InjectedAbort":             TestLoopInjectedAbortInvisibleAndReprocessed,
		"WatchdogAborts":            TestLoopWatchdogAborts,
		"StopCommits":               TestLoopStopCommitsOpenTransaction,
		"Retries":                   TestLoopRetriesWithBackoff,
		"Skip":                      TestLoopSkipPolicy,
		"Fail":                      TestLoopFailPolicyStops,
		"Routed":                    TestLoopRoutedOutputs,
		"SlowWithinOwnDeadlines":    TestLoopRecordWithinItsOwnDeadlinesIsNotCut,
		"OutputTooLargeDeadLetters": TestLoopOutputTooLargeDeadLettered,
		"OutputTooLargeFails":       TestLoopOutputTooLargeFails,
		"DeadLetterTooLarge":        TestLoopDeadLetterTooLarge,
		"RoutedToMissingTopic":      TestLoopRoutedToMissingTopic,
		"RecordBound":               TestLoopRecordBoundEndsTransactions,
		"ByteBound":                 TestLoopByteBoundEndsTransactions,
		"AtLeastOnce":               TestLoopAtLeastOnceLosesNothing,
	}
}

// With two workers the records of different partitions run through the
// chain at the same time, never more than two at once, each worker on its
// own chain instance; with one worker, one at a time. Outputs are exactly
// once and in per-key order either way.
func TestLoopWorkersRunConcurrently(t *testing.T) {
	for _, workers := range []int{1, 2} {
		e := newLoopEnv(t)
		e.noLineage = true
		const n, keys = 600, 30
		e.produce(n, keys)
		var inside, most atomic.Int64
		instances := map[*transform.Chain]*atomic.Int64{} // calls per chain, written before Run
		mk := func() *transform.Chain {
			busy := &atomic.Int64{} // this instance's calls in progress
			calls := &atomic.Int64{}
			var c *transform.Chain
			c = loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
				if busy.Add(1) != 1 {
					t.Error("a chain instance ran two records at once")
				}
				defer busy.Add(-1)
				calls.Add(1)
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				return append(out, r), nil
			})
			instances[c] = calls
			return c
		}
		chain := mk()
		var more []*transform.Chain
		for range workers - 1 {
			more = append(more, mk())
		}
		run := e.start("g", "g-a", chain, Options{Chains: more, MaxRecordsPerTxn: 300})
		eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
		run.stop(t, 10*time.Second)
		e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
		if got := most.Load(); got != int64(workers) {
			t.Errorf("%d workers: at most %d records ran through the chain at once, want %d", workers, got, workers)
		}
		for c, calls := range instances {
			if calls.Load() == 0 {
				t.Errorf("%d workers: chain instance %p ran no record", workers, c)
			}
		}
		if got := testutil.ToFloat64(run.pm.Consumed); got != n {
			t.Errorf("%d workers: processor_records_consumed_total = %v, want %d", workers, got, n)
		}
	}
}

// split cuts one partition's records of a poll into contiguous runs in
// offset order, a quarter of a worker's share at first, shrinking to
// minChunk towards the poll's end; an ordered chain's partition is one
// batch.
func TestSplitChunks(t *testing.T) {
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		recs[i] = &kgo.Record{Offset: int64(i)}
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}}}}}}
	c := chainOf(t, "plain", passThrough)
	pl := newPool(c, []*transform.Chain{chainOf(t, "plain", passThrough)}, OrderKey)
	if !pl.split(fs) {
		t.Fatal("split of 1000 records for 2 workers: not shared")
	}
	var sizes []int
	next := 0
	for _, b := range pl.batches {
		if b.at != next || b.recs[0].Offset != int64(next) {
			t.Fatalf("batch at %d (offset %d), want %d", b.at, b.recs[0].Offset, next)
		}
		next += len(b.recs)
		sizes = append(sizes, len(b.recs))
	}
	if next != len(recs) {
		t.Fatalf("batches hold %d records, want %d", next, len(recs))
	}
	if sizes[0] != 125 || sizes[len(sizes)-1] > minChunk {
		t.Errorf("chunk sizes %v: want 125 first and at most %d last", sizes, minChunk)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] > sizes[i-1] {
			t.Errorf("chunk sizes %v grow at %d", sizes, i)
		}
	}

	ordered := orderedChain(t, passThrough)
	pl = newPool(ordered, []*transform.Chain{orderedChain(t, passThrough)}, OrderPartition)
	if pl.split(fs) || len(pl.batches) != 1 {
		t.Errorf("an ordered chain's one partition: shared, or %d batches; want one batch on one worker", len(pl.batches))
	}
}
