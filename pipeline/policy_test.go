package pipeline

// Loop tests of what happens to records that fail, and of the loop's start
// and fatal ends: retries with backoff, the skip and fail policies, routed
// outputs, a record slow within its own deadlines, missing
// required topics, and a stop while still connecting. The real Pipeline;
// the policies on a session in memory (newMemEnv), the stops on a real
// txn.Session against kfake, as in loop_test.go.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// callLog records, per input value, when the transform was called.
type callLog struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func (c *callLog) add(v string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string][]time.Time{}
	}
	c.calls[v] = append(c.calls[v], time.Now())
	return len(c.calls[v])
}

func (c *callLog) get(v string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[v]
}

// waitDone waits for run to return on its own and returns its error.
func waitDone(t *testing.T, run *loopRun, within time.Duration, what string) error {
	t.Helper()
	select {
	case <-run.done:
		return run.err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s: %s; %+v", within, what, run.p.Stats())
	}
	return nil
}

// checkStoppedAt checks what a run of group "g" that stopped at the failed
// input rec committed: nothing from rec on on its partition, offsets the
// counters agree with, and on topic exactly the inputs below them.
func (e *loopEnv) checkStoppedAt(run *loopRun, topic string, rec *kgo.Record) {
	e.t.Helper()
	committed := e.committedOffsets("g")
	if c := committed[rec.Partition]; c > rec.Offset {
		e.t.Errorf("partition %d committed up to %d, past the failed record at %d", rec.Partition, c, rec.Offset)
	}
	checkCounters(e.t, run, sumOffsets(committed))
	e.checkTopic(topic, e.read(topic, true), func(in *kgo.Record) bool { return in.Offset < committed[in.Partition] })
}

// poisonChain is a pass-through chain (loopChain) that fails poison, and
// only it, with the error "poison record".
func poisonChain(t *testing.T, poison *kgo.Record) *transform.Chain {
	t.Helper()
	return loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if string(r.Value) == string(poison.Value) {
			return out, errors.New("poison record")
		}
		return append(out, r), nil
	})
}

// Retriable failures are retried with doubling backoff (waits drawn
// between half and all of 10ms, 20ms, ...) up to MaxRetries times; permanent ones are not retried. A record that
// passes on a retry is output once; one that is still failing after
// 1+MaxRetries attempts, or that failed permanently, becomes one dead
// letter saying how many attempts it had and why. transform_errors_total
// and transform_retries_total count every attempt.
func TestLoopRetriesWithBackoff(t *testing.T) {
	e := newMemEnv(t)
	const n, keys, maxRetries = 30, 3, 4
	e.produce(n, keys)
	kind := func(r *kgo.Record) string {
		switch loopSeq(string(r.Value)) % 5 {
		case 1:
			return "flaky" // fails twice, then passes
		case 2:
			return "hopeless" // always fails, retriably
		case 3:
			return "broken" // fails permanently
		}
		return "good"
	}
	var log callLog
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		call := log.add(string(r.Value))
		switch kind(r) {
		case "flaky":
			if call <= 2 {
				return out, transform.Retriable(errors.New("lookup timed out"))
			}
		case "hopeless":
			return out, transform.Retriable(errors.New("lookup timed out"))
		case "broken":
			return out, errors.New("broken record")
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: e.dlq, MaxRetries: maxRetries})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	count := map[string]int{}
	for _, in := range e.inputs {
		k := kind(in)
		count[k]++
		calls := log.get(string(in.Value))
		want := 1
		switch k {
		case "flaky":
			want = 3
		case "hopeless":
			want = 1 + maxRetries
		}
		// The waits' floors: 5ms + 10ms for flaky, 5 + 10 + 20 + 40ms for
		// hopeless (equal jitter: half of 10, 20, 40, 80ms at least).
		var backoff time.Duration
		for i := range want - 1 {
			backoff += retryPolicy().Floor(i)
		}
		if k == "hopeless" && backoff != 75*time.Millisecond {
			t.Fatalf("the floors of %d retries add up to %s, want 75ms", maxRetries, backoff)
		}
		if len(calls) != want {
			t.Errorf("%s input %q: %d transform calls, want %d", k, in.Value, len(calls), want)
			continue
		}
		if took := calls[len(calls)-1].Sub(calls[0]); took < backoff {
			t.Errorf("%s input %q: %d calls within %s, want the backoff between them to add up to at least %s", k, in.Value, len(calls), took, backoff)
		}
	}
	st := run.p.Stats()
	if st.Aborts != 0 || st.Consumed != n || st.Produced != uint64(count["good"]+count["flaky"]) {
		t.Errorf("Stats() = %+v, want no aborts, %d consumed, %d produced", st, n, count["good"]+count["flaky"])
	}
	for name, c := range map[string]struct {
		got  float64
		want int
	}{
		"transform_retries_total":                {testutil.ToFloat64(run.pm.Retries), 2*count["flaky"] + maxRetries*count["hopeless"]},
		"transform_errors_total{loop,retriable}": {testutil.ToFloat64(run.pm.TransformErrors.WithLabelValues("loop", classRetriable)), 2*count["flaky"] + (1+maxRetries)*count["hopeless"]},
		"transform_errors_total{loop,permanent}": {testutil.ToFloat64(run.pm.TransformErrors.WithLabelValues("loop", classPermanent)), count["broken"]},
		"records_dlq_total":                      {testutil.ToFloat64(run.pm.DLQ), count["hopeless"] + count["broken"]},
		"records_produced_total{out}":            {testutil.ToFloat64(run.pm.Produced.WithLabelValues(e.out)), count["good"] + count["flaky"]},
	} {
		if c.got != float64(c.want) {
			t.Errorf("processor_%s = %v, want %d", name, c.got, c.want)
		}
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(e.out, e.read(e.out, true), func(in *kgo.Record) bool { k := kind(in); return k == "good" || k == "flaky" })
	dead := e.read(e.dlq, true)
	e.checkTopic(e.dlq, dead, func(in *kgo.Record) bool { k := kind(in); return k == "hopeless" || k == "broken" })
	for _, d := range dead {
		in := e.byValue[string(d.Value)]
		if in == nil {
			continue
		}
		msg, _ := header(d, record.HeaderError)
		stage, _ := header(d, record.HeaderErrorTransform)
		attempts, _ := header(d, record.HeaderErrorAttempts)
		want := [3]string{"lookup timed out", "loop", "5"}
		if kind(in) == "broken" {
			want = [3]string{"broken record", "loop", "1"}
		}
		if !strings.Contains(msg, want[0]) || stage != want[1] || attempts != want[2] {
			t.Errorf("dead letter of %s input %q: error %q, transform %q, attempts %q; want %q, %q, %q",
				kind(in), d.Value, msg, stage, attempts, want[0], want[1], want[2])
		}
	}
}

// Under the skip policy a failed record is dropped and counted in
// records_skipped_total; the other records are output exactly once, and
// nothing goes to the dead-letter topic.
func TestLoopSkipPolicy(t *testing.T) {
	e := newMemEnv(t)
	e.noLineage = true
	const n, keys = 300, 10
	e.produce(n, keys)
	bad := func(r *kgo.Record) bool { return loopSeq(string(r.Value))%7 == 3 }
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if bad(r) {
			return out, errors.New("bad record")
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{OnError: Skip, DLQTopic: e.dlq})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	nBad := 0
	for _, in := range e.inputs {
		if bad(in) {
			nBad++
		}
	}
	if got := testutil.ToFloat64(run.pm.Skipped); got != float64(nBad) {
		t.Errorf("processor_records_skipped_total = %v, want %d", got, nBad)
	}
	if got := testutil.ToFloat64(run.pm.DLQ); got != 0 {
		t.Errorf("processor_records_dlq_total = %v under skip", got)
	}
	st := run.p.Stats()
	if st.Consumed != n || st.Produced != uint64(n-nBad) || st.Aborts != 0 {
		t.Errorf("Stats() = %+v, want %d consumed, %d produced, no aborts", st, n, n-nBad)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(e.out, e.read(e.out, true), func(in *kgo.Record) bool { return !bad(in) })
	if dead := e.read(e.dlq, false); len(dead) > 0 {
		t.Errorf("%d dead letters under skip", len(dead))
	}
}

// Under the fail policy (the default) the first record that fails stops
// the processor: Run returns a *RecordError naming it, the transaction
// holding it is aborted (transform_error), nothing from it on is committed
// on its partition, Healthy reports the error and Ready is false.
func TestLoopFailPolicyStops(t *testing.T) {
	e := newMemEnv(t)
	const n, keys = 300, 10
	e.produce(n, keys)
	poison := e.inputs[n/2]
	chain := poisonChain(t, poison)
	run := e.start("g", "g-a", chain, Options{Lineage: true, MaxRecordsPerTxn: 40})
	err := waitDone(t, run, 20*time.Second, "the fail policy must stop at the poison record")

	var re *RecordError
	want := record.Source{Topic: e.in, Partition: poison.Partition, Offset: poison.Offset}
	if !errors.As(err, &re) || re.Source != want || !strings.Contains(err.Error(), "poison record") {
		t.Fatalf("Run returned %v, want a *RecordError for %+v", err, want)
	}
	if h := run.p.Healthy(); h == nil || h.Error() != err.Error() {
		t.Errorf("Healthy() = %v after the failure, want %v", h, err)
	}
	if run.p.Ready() {
		t.Error("Ready() = true after Run returned")
	}
	if st := run.p.Status(); st.Health != err.Error() || st.Ready || st.LastError == nil || st.LastError.Message != err.Error() {
		t.Errorf("Status() = health %q, ready %v, last error %+v; want the failure as health and last error, not ready", st.Health, st.Ready, st.LastError)
	}
	if a := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonTransform))); a != 1 {
		t.Errorf("aborted{reason=transform_error} = %v, want 1", a)
	}
	e.checkStoppedAt(run, e.out, poison)
}

// Outputs routed to another topic go there, with lineage, and are counted
// under that topic only: with every output routed, records_produced_total
// has no series for the default output topic.
func TestLoopRoutedOutputs(t *testing.T) {
	e := newMemEnv(t)
	side := e.createTopic("side", loopPartitions, nil)
	const n, keys = 200, 10
	e.produce(n, keys)
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		r.Topic = side
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{Lineage: true})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	if got := testutil.ToFloat64(run.pm.Produced.WithLabelValues(side)); got != n {
		t.Errorf("processor_records_produced_total{topic=%s} = %v, want %d", side, got, n)
	}
	if series := testutil.CollectAndCount(run.pm.Produced); series != 1 {
		t.Errorf("processor_records_produced_total has %d series, want only the one for %s", series, side)
	}
	if st := run.p.Stats(); st.Produced != n || st.Consumed != n {
		t.Errorf("Stats() = %+v, want %d produced and consumed", st, n)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(side, e.read(side, true), func(*kgo.Record) bool { return true })
	if recs := e.read(e.out, false); len(recs) != 0 {
		t.Errorf("%d records in the default output topic", len(recs))
	}
}

// A record is cut only past its own worst case when that is longer than
// half the budget: with PROCESSOR_TRANSFORM_TIMEOUT and retries that fit
// the budget (CheckBudget), a record that times out three times and passes
// on its fourth attempt, past half the budget in all, is output like any
// other, with no dead letter and no watchdog abort.
func TestLoopRecordWithinItsOwnDeadlinesIsNotCut(t *testing.T) {
	e := newMemEnv(t)
	const n, keys = 30, 3
	e.produce(n, keys)
	slow := e.inputs[n/2]
	const budget, timeout, retries = 600 * time.Millisecond, 100 * time.Millisecond, 3 // worst case 470ms
	var log callLog
	chain := loopChain(t, func(ctx context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if string(r.Value) == string(slow.Value) && log.add(string(r.Value)) <= retries {
			<-ctx.Done()
			return out, ctx.Err()
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{Lineage: true, TxnBudget: budget, TransformTimeout: timeout, MaxRetries: retries,
		OnError: DeadLetter, DLQTopic: e.dlq})
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	calls := log.get(string(slow.Value))
	if len(calls) != retries+1 {
		t.Fatalf("%d attempts of the slow record, want %d", len(calls), retries+1)
	}
	if took := calls[retries].Sub(calls[0]); took < budget/2 {
		t.Errorf("the slow record's attempts took %s, not past half the budget: the test shows nothing", took)
	}
	if w := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonWatchdog))); w != 0 {
		t.Errorf("aborted{reason=watchdog} = %v, want 0", w)
	}
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
	if dead := e.read(e.dlq, true); len(dead) != 0 {
		t.Errorf("%d dead letters, want none", len(dead))
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
}

// Run refuses to start when a required topic does not exist: it returns a
// *MissingTopicsError naming exactly the missing ones.
func TestLoopMissingRequiredTopic(t *testing.T) {
	e := newMemEnv(t)
	run := e.start("g", "g-a", loopChain(t, passThrough), Options{RequireTopics: []string{e.out, "absent", e.dlq}})
	err := waitDone(t, run, 20*time.Second, "a required topic is missing")
	var mt *MissingTopicsError
	if !errors.As(err, &mt) || len(mt.Topics) != 1 || mt.Topics[0] != "absent" || !strings.Contains(err.Error(), "[absent]") {
		t.Fatalf("Run returned %v, want a *MissingTopicsError naming only absent", err)
	}
	if h := run.p.Healthy(); h == nil {
		t.Error("Healthy() = nil after Run failed")
	}
}

// A stop while the session is still trying to reach the brokers is a clean
// stop: Run returns nil promptly. Meanwhile the pipeline counts as healthy
// (waiting for Kafka is not a stall) and not ready.
func TestLoopStopWhileConnecting(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := txn.New(txn.Options{
		Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"in"}, TransactionalID: "g-a",
		SessionTimeout: 10 * time.Second, TransactionTimeout: 8 * time.Second, Metrics: txn.NewMetrics(reg), Logger: loopLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(loopChain(t, passThrough), Options{OutputTopic: "out", CommitInterval: 100 * time.Millisecond, MaxRecordsPerTxn: 10,
		TransactionTimeout: 100 * time.Millisecond, Metrics: NewMetrics(reg), Logger: loopLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := &loopRun{p: p, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		run.err = p.Run(ctx, s, s)
	}()
	eventually(t, 10*time.Second, "the session to start connecting", run, func() bool { return s.Connecting() })
	time.Sleep(300 * time.Millisecond) // past the stall timeout
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy() = %v while connecting", err)
	}
	if p.Ready() {
		t.Error("Ready() = true while connecting")
	}
	run.stop(t, 10*time.Second)
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy() = %v after a clean stop", err)
	}
}

// A stop that lands while the loop ends a transaction, whose ending then
// fails (EndTxn refused), is still a clean stop: the loop does not retry
// or rebuild under a canceled context, Run returns nil promptly, and a
// restart with the same transactional ID (which aborts the undecided
// transaction) finishes the input exactly once.
func TestLoopStopWhileEndingFails(t *testing.T) {
	e := newLoopEnv(t)
	const n, keys = 20, 2
	e.produce(n, keys)
	g := newGate(10 * time.Second)
	// One record per transaction: the step that processes the held record
	// also ends its transaction.
	first := e.start("g", "g-a", g.chain(t), Options{Lineage: true, MaxRecordsPerTxn: 1, CommitInterval: 5 * time.Second})
	g.wait(t, first, "the first record")
	h := e.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.InvalidTxnState, TopLevel: true})
	first.cancel()
	close(g.release)
	first.stop(t, 10*time.Second)
	if h.Hits() != 1 {
		t.Fatalf("the EndTxn fault was hit %d times, want once: the stop did not land in the ending", h.Hits())
	}
	if st := first.p.Stats(); st.Commits != 0 || st.Consumed != 0 {
		t.Errorf("Stats() = %+v, want nothing committed", st)
	}
	if a := abortedTotal(first.tm); a != 0 {
		t.Errorf("processor_transactions_aborted_total = %v: the session counted an outcome it does not know", a)
	}

	second := e.start("g", "g-a", loopChain(t, passThrough), Options{Lineage: true})
	eventually(t, 30*time.Second, "a restart to commit every input", second, func() bool { return e.caughtUp("g") })
	second.stop(t, 10*time.Second)
	checkCounters(t, second, n)
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}
