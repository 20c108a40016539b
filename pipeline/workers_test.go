package pipeline

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

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
			c = loopChain(t, func(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
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
