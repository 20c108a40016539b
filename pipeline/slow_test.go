package pipeline

// Loop tests of one record that does not finish, in the middle of a few
// hundred: it must be found directly (by how long it runs), not by halving
// the transaction until it is alone in it, and fail under the policy while
// every other record commits exactly once. The real Pipeline on a session
// in memory (newMemEnv): the budget is the loop's, not the broker's.

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// healthWatch polls a run's Healthy every 5ms and keeps the first error.
type healthWatch struct {
	mu    sync.Mutex
	first string
	stop  chan struct{}
	done  chan struct{}
}

func watchHealth(run *loopRun) *healthWatch {
	h := &healthWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
			if err := run.p.Healthy(); err != nil {
				h.mu.Lock()
				if h.first == "" {
					h.first = err.Error()
				}
				h.mu.Unlock()
			}
		}
	}()
	return h
}

func (h *healthWatch) end() string {
	close(h.stop)
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
}

// One record of 300 that does not finish (its transform blocks until its
// context ends, or ignores its context for three budgets) is failed under
// the policy after running for half the transaction's time budget, with
// at most one watchdog abort, not one per halving of the transaction; it
// runs once; every
// other record is output exactly once. While a transform ignores its
// context past its end, the instance is unhealthy and names the record
// and the chain entry; once it returns, healthy again. With two workers,
// only the slow record is blamed, not the ones running beside it.
func TestLoopSlowRecordIsolatedDirectly(t *testing.T) {
	const budget = 400 * time.Millisecond
	cases := []struct {
		name    string
		policy  OnError
		ignore  bool // the transform ignores its context (for 3 budgets)
		workers int
		// ordering, when set, makes the chain ordered and the pipeline
		// deal its records so.
		ordering Ordering
		aborts   float64 // watchdog aborts allowed
	}{
		{name: "blocks until its context ends, dlq", policy: DeadLetter, workers: 1, aborts: 0},
		{name: "blocks until its context ends, skip", policy: Skip, workers: 1, aborts: 0},
		{name: "blocks until its context ends, two workers", policy: DeadLetter, workers: 2, aborts: 0},
		{name: "ignores its context, dlq", policy: DeadLetter, ignore: true, workers: 1, aborts: 1},
		{name: "ignores its context, two workers", policy: DeadLetter, ignore: true, workers: 2, aborts: 1},
		{name: "blocks until its context ends, two workers, ordered by key", policy: DeadLetter, workers: 2, ordering: OrderKey},
		{name: "ignores its context, two workers, ordered by key", policy: DeadLetter, ignore: true, workers: 2, aborts: 1, ordering: OrderKey},
		{name: "blocks until its context ends, two workers, ordered by partition", policy: DeadLetter, workers: 2, ordering: OrderPartition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newMemEnv(t)
			const n, keys = 300, 3
			e.produce(n, keys)
			slow := e.inputs[n/2]
			var log callLog
			fn := func(ctx context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
				if string(r.Value) != string(slow.Value) {
					return append(out, r), nil
				}
				log.add(string(r.Value))
				if c.ignore {
					time.Sleep(3 * budget)
					return append(out, r), nil
				}
				select {
				case <-ctx.Done():
					return out, ctx.Err()
				case <-time.After(20 * time.Second):
				}
				return append(out, r), nil
			}
			loopOrdering = c.ordering
			defer func() { loopOrdering = "" }()
			chain := chainOf(t, "slowpoke", fn)
			o := Options{Lineage: true, TxnBudget: budget, OnError: c.policy, DLQTopic: e.dlq, MaxRetries: 3}
			for range c.workers - 1 {
				o.Chains = append(o.Chains, chainOf(t, "slowpoke", fn))
			}
			start := time.Now()
			run := e.start("g", "g-a", chain, o)
			health := watchHealth(run)
			eventually(t, 60*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
			isolated := time.Since(start)
			unhealthy := health.end()
			healthNow := run.p.Healthy()
			run.stop(t, 10*time.Second)

			watchdog := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonWatchdog)))
			calls := len(log.get(string(slow.Value)))
			t.Logf("caught up %s after start; %v watchdog aborts, %v aborts in all, %d runs of the slow record",
				isolated.Round(time.Millisecond), watchdog, abortedTotal(run.tm), calls)
			// One abort when the transform ignores its context (it returns
			// after the budget), or when the record began late in its
			// transaction; none otherwise.
			if watchdog > 1 {
				t.Errorf("aborted{reason=watchdog} = %v, want at most 1: the slow record must be found by how long it runs, not by halving the transaction", watchdog)
			}
			if calls != 1 {
				t.Errorf("the slow record ran %d times, want once: once it ran past its limit its retry must not run it again", calls)
			}

			isSlow := func(in *kgo.Record) bool { return in == slow }
			e.checkTopic(e.out, e.read(e.out, true), func(in *kgo.Record) bool { return !isSlow(in) })
			dead := e.read(e.dlq, true)
			if c.policy == DeadLetter {
				e.checkTopic(e.dlq, dead, isSlow)
				if len(dead) == 1 {
					msg, _ := header(dead[0], record.HeaderError)
					for _, want := range []string{"did not finish within", "PROCESSOR_TRANSFORM_TIMEOUT", "PROCESSOR_TRANSACTION_TIMEOUT"} {
						if !strings.Contains(msg, want) {
							t.Errorf("dead letter error %q does not say %q", msg, want)
						}
					}
					if stage, _ := header(dead[0], record.HeaderErrorTransform); stage != "slowpoke" {
						t.Errorf("dead letter transform %q, want slowpoke", stage)
					}
				}
			} else {
				if len(dead) != 0 {
					t.Errorf("%d dead letters under skip", len(dead))
				}
				if s := testutil.ToFloat64(run.pm.Skipped); s != 1 {
					t.Errorf("processor_records_skipped_total = %v, want 1", s)
				}
			}
			if st := run.p.Stats(); st.Consumed != n || st.Produced != n-1 {
				t.Errorf("Stats() = %+v, want %d consumed, %d produced", st, n, n-1)
			}
			checkCounters(t, run, sumOffsets(e.committedOffsets("g")))

			if healthNow != nil {
				t.Errorf("Healthy() = %v after the slow record was dealt with, want nil", healthNow)
			}
			if c.ignore {
				offset := "offset " + strconv.FormatInt(slow.Offset, 10)
				if !strings.Contains(unhealthy, offset) || !strings.Contains(unhealthy, "slowpoke") || !strings.Contains(unhealthy, "has not returned") {
					t.Errorf("while the transform ignored its context, Healthy() said %q; want it to name the record (%s, partition %d) and the transform slowpoke",
						unhealthy, offset, slow.Partition)
				}
			} else if unhealthy != "" {
				t.Errorf("Healthy() = %q while a transform that watches its context was cut, want nil throughout", unhealthy)
			}
		})
	}
}
