package pipeline

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// At least once, the same loop without transactions: with batches aborted
// on purpose (their outputs already written), every input still reaches
// the output, in per-key order of first appearance, with its lineage;
// some inputs appear twice; none is lost; the group commits everything;
// and only committed batches count as consumed.
func TestLoopAtLeastOnceLosesNothing(t *testing.T) {
	e := newLoopEnv(t)
	const n, keys = 2000, 20
	e.produce(n, keys)
	var calls atomic.Int64
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		calls.Add(1)
		return append(out, r), nil
	})
	inject := func(seq uint64) bool { return seq%3 == 2 }
	run := e.startWith("g", "g-alo", chain, Options{Lineage: true, MaxRecordsPerTxn: 200, InjectAbort: inject},
		func(o *txn.Options) { o.Guarantee = txn.AtLeastOnce })
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	if s := run.p.Status(); s.Guarantee != "at_least_once" {
		t.Errorf("Status().Guarantee = %q", s.Guarantee)
	}
	out := e.read(e.out, true)
	if dirty := e.read(e.out, false); len(dirty) != len(out) {
		t.Errorf("read_committed sees %d records, read_uncommitted %d: at least once writes no transactions", len(out), len(dirty))
	}
	seen := map[string]int{}
	for _, r := range out {
		seen[string(r.Value)]++
		src, ok := Lineage(r)
		in := e.byValue[string(r.Value)]
		if !ok || in == nil || src.Partition != in.Partition || src.Offset != in.Offset {
			t.Errorf("%q: lineage %v %v does not name its input", r.Value, src, ok)
		}
	}
	twice := 0
	for _, in := range e.inputs {
		switch c := seen[string(in.Value)]; {
		case c == 0:
			t.Errorf("%q (partition %d offset %d) lost", in.Value, in.Partition, in.Offset)
		case c > 1:
			twice++
		}
	}
	aborts := testutil.ToFloat64(run.tm.Aborted.WithLabelValues(string(txn.ReasonInjected)))
	if aborts == 0 || twice == 0 {
		t.Errorf("%v injected aborts and %d inputs written more than once; the test needs both", aborts, twice)
	}
	if extra := int(calls.Load()) - n; extra != len(out)-n {
		t.Errorf("%d transform calls beyond the inputs, %d outputs beyond them: every retried record is written again", extra, len(out)-n)
	}
	if st := run.p.Stats(); st.Consumed != n {
		t.Errorf("Stats().Consumed = %d, want %d (aborted batches do not count)", st.Consumed, n)
	}
	t.Logf("%d inputs, %d outputs, %d written twice, %v aborts", n, len(out), twice, aborts)
}
