package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// A service the chain depends on that fails (transform.Unavailable) is
// no record's fault: while it is down, transactions abort and are retried
// with backoff, the instance is not ready and, once it has lasted, not
// healthy, with the service's error; no record is dead-lettered, skipped
// or retried as a record. When it answers again every input is output
// exactly once and the instance is ready and healthy.
func TestLoopOutageFailsNoRecord(t *testing.T) {
	e := newMemEnv(t)
	const n, keys = 200, 5
	e.produce(n, keys)
	var down atomic.Bool
	down.Store(true)
	var calls atomic.Int64
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		calls.Add(1)
		if down.Load() {
			return out, transform.Unavailable(errors.New("schema registry at PROCESSOR_SCHEMA_REGISTRY_URL=http://127.0.0.1:1 is unreachable"))
		}
		return append(out, r), nil
	})
	// A stall timeout of 8s: the outage is unhealthy after 2s.
	run := e.start("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: e.dlq, MaxRetries: 3, TransactionTimeout: 8 * time.Second})
	eventually(t, 10*time.Second, "a transaction to abort for the outage", run, func() bool {
		return testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonUnavailable))) >= 1
	})
	if run.p.Ready() {
		t.Error("Ready() = true during the outage")
	}
	eventually(t, 10*time.Second, "Healthy to report the outage", run, func() bool { return run.p.Healthy() != nil })
	if err := run.p.Healthy(); !strings.Contains(err.Error(), "PROCESSOR_SCHEMA_REGISTRY_URL") || !strings.Contains(err.Error(), "no record is failed") {
		t.Errorf("Healthy() = %q, want the service's error naming its setting", err)
	}
	aborts := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonUnavailable)))
	if c := calls.Load(); c > int64(4*aborts)+int64(n) {
		t.Errorf("%d chain calls for %v aborted transactions: the outage was retried per record, not per transaction", c, aborts)
	}
	if aborts > 40 {
		t.Errorf("%v transactions aborted in about 2s: no backoff between them", aborts)
	}
	down.Store(false)
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	// The session's commit shows in the offsets before the loop has
	// accounted for it (which ends the outage): wait for that, and fail if
	// it does not come.
	eventually(t, 10*time.Second, "Healthy() and Ready() after the outage", run, func() bool { return run.p.Healthy() == nil && run.p.Ready() })
	run.stop(t, 10*time.Second)
	if got := e.read(e.dlq, true); len(got) != 0 {
		t.Errorf("%d dead letters, want none: an outage is no record's fault", len(got))
	}
	if r := testutil.ToFloat64(run.pm.Retries); r != 0 {
		t.Errorf("transform_retries_total = %v, want 0", r)
	}
	if u := testutil.ToFloat64(run.pm.TransformErrors.WithLabelValues("loop", classUnavailable)); u < 1 {
		t.Errorf("transform_errors_total{class=unavailable} = %v, want at least 1", u)
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	e.checkTopic(e.out, e.read(e.out, true), func(*kgo.Record) bool { return true })
}

// A refusal no retry clears (transform.Fatal) stops the run with that
// error and fails no record: nothing is dead-lettered and nothing from the
// record on is committed.
func TestLoopFatalStopsWithoutFailingRecords(t *testing.T) {
	e := newMemEnv(t)
	e.produce(50, 3)
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if string(r.Value) == "k1:10" {
			return out, transform.Fatal(errors.New("the schema registry refused the credentials (401)"))
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: e.dlq})
	err := waitDone(t, run, 15*time.Second, "a fatal error should stop the run")
	if err == nil || !transform.IsFatal(err) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("Run() = %v, want the fatal error", err)
	}
	var re *RecordError
	if errors.As(err, &re) {
		t.Errorf("Run() = %v: a RecordError, but the record is not at fault", err)
	}
	if got := e.read(e.dlq, true); len(got) != 0 {
		t.Errorf("%d dead letters, want none", len(got))
	}
	for _, in := range e.inputs {
		if string(in.Value) == "k1:10" {
			e.checkStoppedAt(run, e.out, in)
		}
	}
}
