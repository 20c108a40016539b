package pipeline

// Loop tests of how transactions are sized and of what the loop reports
// while it runs: the record bound, the byte bound, consumer lag, and an
// idle loop. Real Pipeline on a real txn.Session against kfake, as in
// loop_test.go; the budget running out before the first record on a
// session in memory (newMemEnv).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// histogramOf returns h's sample count and sum, and the cumulative count
// of its bucket whose upper bound is le (-1 when it has none).
func histogramOf(t *testing.T, h prometheus.Histogram, le float64) (count uint64, sum float64, atMost int64) {
	t.Helper()
	m := &dto.Metric{}
	if err := h.Write(m); err != nil {
		t.Fatal(err)
	}
	atMost = -1
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetUpperBound() == le {
			atMost = int64(b.GetCumulativeCount())
		}
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(), atMost
}

// produceSized writes n keyed input records of exactly size bytes (key and
// value), values "k<key>:<seq>" with the sequence zero-padded, and keeps
// them like produce does.
func (e *loopEnv) produceSized(n, keys, size int) {
	e.t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		j := len(e.inputs) + i
		k := fmt.Sprintf("k%03d", j%keys)
		v := fmt.Sprintf("%s:%0*d", k, size-len(k)-len(k)-1, j/keys)
		recs[i] = &kgo.Record{Topic: e.in, Key: []byte(k), Value: []byte(v)}
		if len(k)+len(v) != size {
			e.t.Fatalf("input record of %d bytes, want %d", len(k)+len(v), size)
		}
	}
	e.produceInputs(recs, kgo.ProducerLinger(time.Millisecond))
}

// A transaction ends as soon as it holds MaxRecordsPerTxn input records,
// long before its commit interval: 96 inputs with a bound of 16 commit in
// exactly 6 transactions of exactly 16, none aborted, and commits do not
// shrink the bound. Without lineage the outputs carry no lineage headers.
func TestLoopRecordBoundEndsTransactions(t *testing.T) {
	e := newLoopEnv(t)
	e.noLineage = true
	const n, keys, bound = 96, 12, 16
	e.produce(n, keys)
	run := e.start("g", "g-a", loopChain(t, passThrough), Options{CommitInterval: 5 * time.Second, MaxRecordsPerTxn: bound})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	st := run.p.Stats()
	if st.Commits != n/bound || st.Aborts != 0 || st.Consumed != n || st.Produced != n {
		t.Errorf("Stats() = %+v, want %d commits of %d records, no aborts, %d consumed and produced", st, n/bound, bound, n)
	}
	count, sum, atMost := histogramOf(t, run.tm.Records, bound)
	if count != n/bound || sum != n || atMost != n/bound {
		t.Errorf("transaction_records: %d transactions, %v records, %d of them with at most %d; want %d transactions of %d",
			count, sum, atMost, bound, n/bound, bound)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}

// A transaction collects records over several polls until its record
// bound: 5 inputs polled first and 5 produced while the first is in the
// transform commit in one transaction of 10.
func TestLoopTransactionSpansPolls(t *testing.T) {
	e := newLoopEnv(t)
	e.noLineage = true
	const half, keys = 5, 5
	e.produce(half, keys)
	g := newGate(10 * time.Second)
	run := e.start("g", "g-a", g.chain(t), Options{CommitInterval: 5 * time.Second, MaxRecordsPerTxn: 2 * half})
	g.wait(t, run, "the first record")
	e.produce(half, keys)
	close(g.release)
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	if st := run.p.Stats(); st.Commits != 1 || st.Aborts != 0 || st.Consumed != 2*half {
		t.Errorf("Stats() = %+v, want one commit of %d records", st, 2*half)
	}
	if count, sum, _ := histogramOf(t, run.tm.Records, 16); count != 1 || sum != 2*half {
		t.Errorf("transaction_records: %d transactions, %v records; want one of %d", count, sum, 2*half)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}

// MaxTxnBytes ends a transaction at the first poll boundary at or past the
// bound, and polls are sized from the bytes per record seen so far, so
// records of a constant size fill each transaction exactly: 200 records of
// 100 bytes under a 1,000-byte bound commit in exactly 20 transactions of
// 10. Afterwards the next transaction's first poll may take 10 records.
func TestLoopByteBoundEndsTransactions(t *testing.T) {
	e := newLoopEnv(t)
	e.noLineage = true
	const n, keys, size, maxBytes = 200, 10, 100, 1000
	e.produceSized(n, keys, size)
	run := e.start("g", "g-a", loopChain(t, passThrough), Options{CommitInterval: 5 * time.Second, MaxRecordsPerTxn: 500, MaxTxnBytes: maxBytes})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	const per = maxBytes / size
	st := run.p.Stats()
	if st.Commits != n/per || st.Aborts != 0 || st.Consumed != n {
		t.Errorf("Stats() = %+v, want %d commits of %d records, no aborts, %d consumed", st, n/per, per, n)
	}
	if count, sum, atMost := histogramOf(t, run.tm.Records, 16); count != n/per || sum != n || atMost != n/per {
		t.Errorf("transaction_records: %d transactions, %v records, %d of at most 16; want %d transactions of %d", count, sum, atMost, n/per, per)
	}
	if got := run.p.pollSize(); got != per {
		t.Errorf("after transactions of %d-byte records under a %d-byte bound the next poll asks for %d records, want %d", size, maxBytes, got, per)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}

// Stats().Lag is the consumer's lag, last stable offset minus committed
// offset over the assigned partitions: with a backlog and nothing
// committed it is positive and at most the backlog; while the loop is busy
// the end offsets are read in the background (EndOffsetsInterval), so
// input that arrives meanwhile shows at once and the lag is exactly the
// whole input; once every input is committed it falls to 0. An idle loop
// then commits nothing (no empty transactions), stays healthy and ready,
// and keeps its counters.
func TestLoopLagAndIdle(t *testing.T) {
	e := newLoopEnv(t)
	const n, keys, more = 2000, 20, 100
	e.produce(n, keys)
	g := newGate(20 * time.Second)
	run := e.start("g", "g-a", g.chain(t), Options{Lineage: true, MaxRecordsPerTxn: 50, EndOffsetsInterval: 50 * time.Millisecond})
	g.wait(t, run, "the first record")
	if lag := run.p.Stats().Lag; lag <= 0 || lag > n {
		t.Errorf("Stats().Lag = %d with %d records and nothing committed, want it positive and at most %d", lag, n, n)
	}
	e.produce(more, keys) // while the loop is held in the transform
	eventually(t, 10*time.Second, "the lag to count the input that arrived meanwhile", run, func() bool { return run.p.Stats().Lag == n+more })
	close(g.release)
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	eventually(t, 10*time.Second, "the lag to fall to 0", run, func() bool { return run.p.Stats().Lag == 0 })

	before := run.p.Stats()
	time.Sleep(1500 * time.Millisecond) // longer than the 1s idle poll plus the commit interval
	after := run.p.Stats()
	if after != before {
		t.Errorf("an idle loop changed its counters: %+v, then %+v", before, after)
	}
	if err := run.p.Healthy(); err != nil || !run.p.Ready() {
		t.Errorf("idle: Healthy() = %v, Ready() = %v; want healthy and ready", err, run.p.Ready())
	}
	run.stop(t, 10*time.Second)
	if st := run.p.Stats(); st.Consumed != n+more || st.Produced != n+more || st.Lag != 0 {
		t.Errorf("Stats() = %+v, want %d consumed and produced, lag 0", st, n+more)
	}
	if run.p.Ready() {
		t.Error("Ready() = true after Run returned")
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}

// A transaction budget too short for any record (it is over before the
// first record starts) aborts each transaction as "watchdog" without
// running the transform, failing a record or committing anything, and the
// loop carries on, healthy, until it is stopped.
func TestLoopBudgetOverBeforeTheFirstRecord(t *testing.T) {
	e := newMemEnv(t)
	e.produce(30, 3)
	var calls sync.Map
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		calls.Store(string(r.Value), true)
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{TxnBudget: time.Nanosecond, OnError: DeadLetter, DLQTopic: e.dlq})
	eventually(t, 20*time.Second, "three watchdog aborts", run, func() bool { return run.p.Stats().Aborts >= 3 })
	if err := run.p.Healthy(); err != nil {
		t.Errorf("Healthy() = %v while transactions abort", err)
	}
	run.stop(t, 10*time.Second)

	st := run.p.Stats()
	if st.Commits != 0 || st.Consumed != 0 || st.Produced != 0 {
		t.Errorf("Stats() = %+v, want nothing committed", st)
	}
	var called []string
	calls.Range(func(k, _ any) bool {
		called = append(called, k.(string))
		return true
	})
	if len(called) > 0 {
		t.Errorf("the transform ran on %d records (%s) though no budget was left", len(called), strings.Join(called, ", "))
	}
	checkCounters(t, run, 0)
	if w := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonWatchdog))); w != float64(st.Aborts) {
		t.Errorf("aborted{reason=watchdog} = %v of %d aborts, want all of them", w, st.Aborts)
	}
	if c := e.committedOffsets("g"); len(c) != 0 {
		t.Errorf("committed offsets %v, want none", c)
	}
	if recs := e.read(e.out, true); len(recs) != 0 {
		t.Errorf("%d outputs committed", len(recs))
	}
	if recs := e.read(e.dlq, false); len(recs) != 0 {
		t.Errorf("%d dead letters written", len(recs))
	}
}

// Dead letters count toward MaxTxnBytes as outputs do: a chain that fails
// every record still ends its transactions at the byte bound.
func TestLoopByteBoundCountsDeadLetters(t *testing.T) {
	e := newMemEnv(t)
	e.noLineage = true
	const n, keys, size, maxBytes = 100, 10, 100, 1000
	e.produceSized(n, keys, size)
	fail := func(context.Context, record.Source, *kgo.Record, []*kgo.Record) ([]*kgo.Record, error) {
		return nil, errors.New("bad record")
	}
	run := e.start("g", "g-a", loopChain(t, fail), Options{CommitInterval: 5 * time.Second, MaxRecordsPerTxn: 500,
		MaxTxnBytes: maxBytes, OnError: DeadLetter, DLQTopic: e.dlq})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	if count, sum, atMost := histogramOf(t, run.tm.Records, 16); count < n/(maxBytes/size) || sum != n || uint64(atMost) != count {
		t.Errorf("transaction_records: %d transactions, %v records, %d of at most 16; want transactions of at most %d dead letters",
			count, sum, atMost, maxBytes/size)
	}
}
