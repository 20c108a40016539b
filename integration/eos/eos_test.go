package eos

import (
	"errors"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/txn"
)

// Two instances in one group copy 50,000 keyed records over 6 partitions
// while input keeps arriving; one instance is stopped mid-run and the other
// takes over its partitions. A read_committed reader then finds every input
// exactly once with per-key order kept, and the group's committed offsets
// equal the input's end offsets.
func TestExactlyOnceTwoInstancesOneStopped(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("eos-in"), N: 50_000, Keys: 500}
		out, group := itest.Unique("eos-out"), itest.Unique("eos-group")
		tg.NewTopics(t, 6, in.Topic, out)
		tg.Produce(t, in, 0, in.N/2)

		o := itest.InstanceOpts{Group: group, Topics: []string{in.Topic}, Out: out, MaxRecords: 1000}
		o.TxnID = group + "-a"
		a := tg.Start(t, o)
		o.TxnID = group + "-b"
		b := tg.Start(t, o)

		// Input keeps arriving in chunks while the instances run; the last
		// quarter arrives only after a has stopped, so a stops mid-run.
		aStopped := make(chan struct{})
		produced := make(chan struct{})
		go func() {
			defer close(produced)
			const chunks = 20
			for i := range chunks {
				if i == chunks/2 {
					select {
					case <-aStopped:
					case <-t.Context().Done(): // the test failed before stopping a
						return
					}
				}
				lo, hi := in.N/2+i*(in.N/2)/chunks, in.N/2+(i+1)*(in.N/2)/chunks
				if !tg.Produce(t, in, lo, hi) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		itest.WaitFor(t, 60*time.Second, "both instances to commit", func() bool {
			return a.Pipeline.Stats().Commits > 0 && b.Pipeline.Stats().Commits > 0
		})
		itest.WaitFor(t, 60*time.Second, "a third of the input to commit", func() bool { return itest.SumConsumed(a, b) >= uint64(in.N/3) })
		a.Stop(t)
		close(aStopped)
		itest.WaitClosed(t, produced, itest.FeedTimeout, "the input feeder to write the second half of the input")
		tg.WaitCaughtUp(t, group, in.Topic, b)
		b.Stop(t)

		t.Logf("%s: %s", tg.Name, itest.FmtStats(a, b))
		if got := itest.SumConsumed(a, b); got != uint64(in.N) {
			t.Errorf("committed input records summed over instances = %d, want %d", got, in.N)
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
		tg.Audit(t, group, []string{in.Topic}, []string{out})
		if !tg.IsCaughtUp(t, group, in.Topic) {
			t.Error("committed offsets differ from the input's end offsets after shutdown")
		}
	})
}

// An aborted transaction leaves nothing visible to read_committed, and its
// input is processed again.
func TestAbortedTransactionInvisibleAndReprocessed(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("abort-in"), N: 3000, Keys: 50}
		out, group := itest.Unique("abort-out"), itest.Unique("abort-group")
		tg.NewTopics(t, 3, in.Topic, out)
		tg.Produce(t, in, 0, in.N)

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
			MaxRecords: 500,
			// Abort the first three transactions.
			InjectAbort: func(seq uint64) bool { return seq <= 3 },
		})
		tg.WaitCaughtUp(t, group, in.Topic, a)
		a.Stop(t)

		if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonInjected))); got != 3 {
			t.Errorf("aborted{reason=injected} = %v, want 3", got)
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
		tg.Audit(t, group, []string{in.Topic}, []string{out})
		// The aborted records were written: a read_uncommitted reader sees
		// them, a read_committed one (above) does not.
		if dirty := tg.ReadAll(t, out, false); len(dirty) <= in.N {
			t.Errorf("read_uncommitted sees %d records, want more than the %d committed ones", len(dirty), in.N)
		}
	})
}

// A second instance with the same transactional ID fences the first. The
// instances fence each other until one has been fenced twice, and that one
// stops with a FencedError naming the ID; the survivor finishes the work
// and the output is still exactly once.
func TestSameTransactionalIDFences(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("fence-in"), N: 20_000, Keys: 100}
		out, group := itest.Unique("fence-out"), itest.Unique("fence-group")
		tg.NewTopics(t, 3, in.Topic, out)
		tg.Produce(t, in, 0, in.N/4)

		o := itest.InstanceOpts{Group: group, TxnID: group + "-shared", Topics: []string{in.Topic}, Out: out, MaxRecords: 200}
		a := tg.Start(t, o)
		itest.WaitFor(t, 30*time.Second, "the first instance to commit", func() bool { return a.Pipeline.Stats().Commits > 0 })
		b := tg.Start(t, o)

		// Keep input flowing so both keep producing and meet the fence.
		stopFeed := make(chan struct{})
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			step := (in.N * 3 / 4) / 200 // about 10 s of input, so both keep meeting the fence
			for i := in.N / 4; i < in.N; i += step {
				select {
				case <-stopFeed:
					tg.Produce(t, in, i, in.N)
					return
				case <-t.Context().Done(): // the test failed before an instance stopped fenced
					return
				case <-time.After(50 * time.Millisecond):
				}
				if !tg.Produce(t, in, i, min(i+step, in.N)) {
					return
				}
			}
		}()
		var loser, winner *itest.Instance
		itest.WaitFor(t, 60*time.Second, "one instance to stop fenced", func() bool {
			for _, c := range [][2]*itest.Instance{{a, b}, {b, a}} {
				select {
				case <-c[0].Done:
					loser, winner = c[0], c[1]
					return true
				default:
				}
			}
			return false
		})
		close(stopFeed)
		itest.WaitClosed(t, fed, itest.FeedTimeout, "the input feeder to write the rest of the input after the fencing")
		var fe *txn.FencedError
		if !errors.As(loser.Err, &fe) || fe.TransactionalID != o.TxnID {
			t.Fatalf("the stopped instance returned %v, want a FencedError for %q", loser.Err, o.TxnID)
		}
		loser.Stopped = true
		if n := testutil.ToFloat64(loser.TxnMetrics.Fenced); n < 2 {
			t.Errorf("loser's producer_fenced_total = %v, want at least 2", n)
		}
		tg.WaitCaughtUp(t, group, in.Topic, winner)
		winner.Stop(t)
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}

// Protocol errors injected at the broker abort transactions (or fail them
// and rebuild the session) without losing or duplicating anything. kfake
// only: a real broker cannot be told to fail.
func TestInjectedProtocolErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		key      kmsg.Key
		err      *kerr.Error
		topLevel bool
	}{
		{"TxnOffsetCommit REBALANCE_IN_PROGRESS", kmsg.TxnOffsetCommit, kerr.RebalanceInProgress, false},
		{"TxnOffsetCommit ILLEGAL_GENERATION", kmsg.TxnOffsetCommit, kerr.IllegalGeneration, false},
		{"TxnOffsetCommit UNSTABLE_OFFSET_COMMIT", kmsg.TxnOffsetCommit, kerr.UnstableOffsetCommit, false},
		{"TxnOffsetCommit CONCURRENT_TRANSACTIONS", kmsg.TxnOffsetCommit, kerr.ConcurrentTransactions, false},
		{"EndTxn CONCURRENT_TRANSACTIONS", kmsg.EndTxn, kerr.ConcurrentTransactions, true},
		{"EndTxn PRODUCER_FENCED", kmsg.EndTxn, kerr.ProducerFenced, true},
		{"EndTxn UNKNOWN_SERVER_ERROR", kmsg.EndTxn, kerr.UnknownServerError, true},
		// kfake applies an EndTxn faulted with REQUEST_TIMED_OUT and then
		// answers the error: the response to a completed EndTxn is lost.
		{"EndTxn dropped response", kmsg.EndTxn, kerr.RequestTimedOut, true},
		{"Produce PRODUCER_FENCED", kmsg.Produce, kerr.ProducerFenced, false},
		{"Produce NOT_LEADER_OR_FOLLOWER", kmsg.Produce, kerr.NotLeaderForPartition, false},
		// A record that fails (here once) must turn the commit into an
		// abort: committing around it would lose it.
		{"Produce UNKNOWN_SERVER_ERROR", kmsg.Produce, kerr.UnknownServerError, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := itest.NewFake(t)
			in := itest.Input{Topic: itest.Unique("fault-in"), N: 4000, Keys: 40}
			out, group := itest.Unique("fault-out"), itest.Unique("fault-group")
			tg.NewTopics(t, 3, in.Topic, out)
			tg.Produce(t, in, 0, in.N/2)
			a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, MaxRecords: 300})
			itest.WaitFor(t, 30*time.Second, "a first commit", func() bool { return a.Pipeline.Stats().Commits > 0 })
			f := kfake.Fault{Keys: []kmsg.Key{c.key}, Err: c.err, TopLevel: c.topLevel}
			if c.key == kmsg.Produce {
				f.Topic = out // not the test's own input
			}
			h := tg.Fake.Fault(f)
			tg.Produce(t, in, in.N/2, in.N)
			tg.WaitCaughtUp(t, group, in.Topic, a)
			a.Stop(t)
			if h.Hits() == 0 {
				t.Errorf("the fault was never hit")
			}
			itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
			tg.Audit(t, group, []string{in.Topic}, []string{out})
		})
	}
}
