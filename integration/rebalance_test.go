package integration

import (
	"context"
	"sync"
	"testing"
	"time"

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
	reg := &transform.Registry{}
	reg.Register("gate", transform.Plain("", func() (transform.Transform, error) {
		return transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			g.once.Do(func() {
				close(g.entered)
				select { // bounded: a test that fails to open the gate does not hang
				case <-g.release:
				case <-time.After(30 * time.Second):
				}
			})
			time.Sleep(d)
			return append(out, r), nil
		}), nil
	}))
	c, err := reg.Build([]transform.Entry{{Name: "gate"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
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
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("rebal-in"), n: 4000, keys: 60}
		out, group := unique("rebal-out"), unique("rebal-group")
		tg.createTopics(t, 6, in.topic, out)
		tg.produce(t, in, 0, in.n)

		gate := newRebalanceGate()
		// A transaction timeout of 20s gives the held transaction a
		// budget of 16s: the rebalance, not the watchdog, must end it.
		a := tg.start(t, instanceOpts{group: group, txnID: group + "-a", topics: []string{in.topic}, out: out,
			chain: gate.chain(t, 100*time.Microsecond), commitInterval: 3 * time.Second, maxRecords: 100_000,
			txnTimeout: 20 * time.Second})
		t.Cleanup(gate.open) // runs before a's stop
		select {
		case <-gate.entered:
		case <-a.done:
			t.Fatalf("a stopped before its first record reached the transform: %v", a.err)
		case <-time.After(30 * time.Second):
			t.Fatal("a's first record did not reach the transform within 30s")
		}
		if st := a.p.Stats(); st.Commits != 0 || st.Aborts != 0 {
			t.Fatalf("a ended a transaction before the held one: %+v", st)
		}
		base := testutil.ToFloat64(a.tm.Rebalance)

		b := tg.start(t, instanceOpts{group: group, txnID: group + "-b", topics: []string{in.topic}, out: out})
		began := time.Now()
		waitFor(t, 12*time.Second, "the group to revoke partitions from a while its transaction is open", func() bool {
			return testutil.ToFloat64(a.tm.Rebalance) > base
		})
		revokedAfter := time.Since(began)
		if st := a.p.Stats(); st.Commits != 0 || st.Aborts != 0 {
			t.Fatalf("a's held transaction ended before the rebalance: %+v", st)
		}
		gate.open()

		waitFor(t, 30*time.Second, "a to end the held transaction", func() bool {
			st := a.p.Stats()
			return st.Commits+st.Aborts > 0
		})
		if st := a.p.Stats(); st.Aborts != 1 || st.Commits != 0 || st.Consumed != 0 {
			t.Errorf("a ended its first transaction with Stats() = %+v; want it aborted, with no commit and no input counted", st)
		}
		if got := testutil.ToFloat64(a.tm.Aborted.WithLabelValues(string(txn.ReasonRebalance))); got < 1 {
			t.Errorf("a: processor_transactions_aborted_total{reason=\"rebalance\"} = %v, want at least 1 (aborts: %v)", got, rebalanceAborts(a.tm))
		}
		if c := testutil.ToFloat64(a.tm.Committed); c != 0 {
			t.Errorf("a: processor_transactions_committed_total = %v after the abort, want 0", c)
		}

		tg.waitCaughtUp(t, group, in.topic, a, b)
		a.stop(t)
		b.stop(t)

		var committed int64
		for _, o := range tg.committedOffsets(t, group, in.topic) {
			committed += o
		}
		if consumed := sumConsumed(a, b); committed != int64(in.n) || consumed != uint64(committed) {
			t.Errorf("the group committed %d input records, the instances counted %d consumed; want both %d", committed, consumed, in.n)
		}
		for name, ins := range map[string]*instance{"a": a, "b": b} {
			st := ins.p.Stats()
			if c := testutil.ToFloat64(ins.tm.Committed); st.Commits != uint64(c) {
				t.Errorf("%s: Stats().Commits = %d, processor_transactions_committed_total = %v", name, st.Commits, c)
			}
			if ab := rebalanceAborts(ins.tm); st.Aborts != uint64(ab) {
				t.Errorf("%s: Stats().Aborts = %d, processor_transactions_aborted_total sums to %v", name, st.Aborts, ab)
			}
			if c := testutil.ToFloat64(ins.pm.Consumed); c != float64(st.Consumed) {
				t.Errorf("%s: processor_records_consumed_total = %v, Stats().Consumed = %d", name, c, st.Consumed)
			}
		}
		checkExactlyOnce(t, in, tg.readAll(t, out, true))
		tg.audit(t, group, []string{in.topic}, []string{out})
		t.Logf("%s: revoked %s after b started; %s; a aborted{rebalance} = %v",
			tg.Name, revokedAfter.Round(time.Millisecond), fmtStats(a, b), testutil.ToFloat64(a.tm.Aborted.WithLabelValues(string(txn.ReasonRebalance))))
	})
}
