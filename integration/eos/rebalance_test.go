package eos

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// rebalanceGate holds the first record that reaches its transform until
// release, so that a test can change the group while a transaction is
// open; every record takes about d.
type rebalanceGate struct {
	entered chan struct{} // closed when the first record is inside the transform
	release chan struct{} // closed to let it go on
	once    sync.Once
	relOnce sync.Once
}

func newRebalanceGate() *rebalanceGate {
	return &rebalanceGate{entered: make(chan struct{}), release: make(chan struct{})}
}

// open lets the held record go on; safe to call more than once.
func (g *rebalanceGate) open() { g.relOnce.Do(func() { close(g.release) }) }

func (g *rebalanceGate) chain(t testing.TB, d time.Duration) *transform.Chain {
	t.Helper()
	return itest.FuncChain(t, "gate", transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		g.once.Do(func() {
			close(g.entered)
			select { // bounded: a test that fails to open the gate does not hang
			case <-g.release:
			case <-time.After(30 * time.Second):
			}
		})
		time.Sleep(d)
		return append(out, r), nil
	}))
}

// rebalanceAborts sums processor_transactions_aborted_total over reasons.
func rebalanceAborts(tm *txn.Metrics) float64 {
	var n float64
	for _, r := range []txn.Reason{txn.ReasonRebalance, txn.ReasonOffsetCommit, txn.ReasonProduce, txn.ReasonTransform,
		txn.ReasonFenced, txn.ReasonEndError, txn.ReasonInjected, txn.ReasonWatchdog, txn.ReasonTimeout} {
		n += testutil.ToFloat64(tm.Aborted.WithLabelValues(string(r)))
	}
	return n
}

// A rebalance that revokes partitions from an instance while its
// transaction is open aborts that transaction with reason "rebalance",
// which counts as neither a commit nor consumed input, and the output
// stays exactly once.
//
// Instance a has a 3s commit interval; its first record is held inside the
// transform (the transaction open, the loop busy) until instance b has
// joined the same group and a has seen partitions revoked. Then a goes on
// and ends the transaction.
func TestRebalanceMidTransactionAborts(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("rebal-in"), N: 4000, Keys: 60}
		out, group := itest.Unique("rebal-out"), itest.Unique("rebal-group")
		tg.NewTopics(t, 6, in.Topic, out)
		tg.Produce(t, in, 0, in.N)

		gate := newRebalanceGate()
		// A transaction timeout of 20s gives the held transaction a
		// budget of 16s: the rebalance, not the watchdog, must end it.
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
			Chain: gate.chain(t, 100*time.Microsecond), CommitInterval: 3 * time.Second, MaxRecords: 100_000,
			TxnTimeout: 20 * time.Second})
		t.Cleanup(gate.open) // runs before a's stop
		select {
		case <-gate.entered:
		case <-a.Done:
			t.Fatalf("a stopped before its first record reached the transform: %v", a.Err)
		case <-time.After(30 * time.Second):
			t.Fatal("a's first record did not reach the transform within 30s")
		}
		if st := a.Pipeline.Stats(); st.Commits != 0 || st.Aborts != 0 {
			t.Fatalf("a ended a transaction before the held one: %+v", st)
		}
		base := testutil.ToFloat64(a.TxnMetrics.Rebalance)

		b := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-b", Topics: []string{in.Topic}, Out: out})
		began := time.Now()
		itest.WaitFor(t, 12*time.Second, "the group to revoke partitions from a while its transaction is open", func() bool {
			return testutil.ToFloat64(a.TxnMetrics.Rebalance) > base
		})
		revokedAfter := time.Since(began)
		if st := a.Pipeline.Stats(); st.Commits != 0 || st.Aborts != 0 {
			t.Fatalf("a's held transaction ended before the rebalance: %+v", st)
		}
		gate.open()

		itest.WaitFor(t, 30*time.Second, "a to end the held transaction", func() bool {
			st := a.Pipeline.Stats()
			return st.Commits+st.Aborts > 0
		})
		if st := a.Pipeline.Stats(); st.Aborts != 1 || st.Commits != 0 || st.Consumed != 0 {
			t.Errorf("a ended its first transaction with Stats() = %+v; want it aborted, with no commit and no input counted", st)
		}
		if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonRebalance))); got < 1 {
			t.Errorf("a: processor_transactions_aborted_total{reason=\"rebalance\"} = %v, want at least 1 (aborts: %v)", got, rebalanceAborts(a.TxnMetrics))
		}
		if c := testutil.ToFloat64(a.TxnMetrics.Committed); c != 0 {
			t.Errorf("a: processor_transactions_committed_total = %v after the abort, want 0", c)
		}

		tg.WaitCaughtUp(t, group, in.Topic, a, b)
		a.Stop(t)
		b.Stop(t)

		var committed int64
		for _, o := range tg.CommittedOffsets(t, group, in.Topic) {
			committed += o
		}
		if consumed := itest.SumConsumed(a, b); committed != int64(in.N) || consumed != uint64(committed) {
			t.Errorf("the group committed %d input records, the instances counted %d consumed; want both %d", committed, consumed, in.N)
		}
		for name, ins := range map[string]*itest.Instance{"a": a, "b": b} {
			st := ins.Pipeline.Stats()
			if c := testutil.ToFloat64(ins.TxnMetrics.Committed); st.Commits != uint64(c) {
				t.Errorf("%s: Stats().Commits = %d, processor_transactions_committed_total = %v", name, st.Commits, c)
			}
			if ab := rebalanceAborts(ins.TxnMetrics); st.Aborts != uint64(ab) {
				t.Errorf("%s: Stats().Aborts = %d, processor_transactions_aborted_total sums to %v", name, st.Aborts, ab)
			}
			if c := testutil.ToFloat64(ins.PipelineMetrics.Consumed); c != float64(st.Consumed) {
				t.Errorf("%s: processor_records_consumed_total = %v, Stats().Consumed = %d", name, c, st.Consumed)
			}
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
		tg.Audit(t, group, []string{in.Topic}, []string{out})
		t.Logf("%s: revoked %s after b started; %s; a aborted{rebalance} = %v",
			tg.Name, revokedAfter.Round(time.Millisecond), itest.FmtStats(a, b), testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonRebalance))))
	})
}
