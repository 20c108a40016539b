package integration

import (
	"errors"
	"testing"
	"time"

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
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("eos-in"), n: 50_000, keys: 500}
		out, group := unique("eos-out"), unique("eos-group")
		tg.createTopics(t, 6, in.topic, out)
		tg.produce(t, in, 0, in.n/2)

		o := instanceOpts{group: group, topics: []string{in.topic}, out: out, maxRecords: 1000}
		o.txnID = group + "-a"
		a := tg.start(t, o)
		o.txnID = group + "-b"
		b := tg.start(t, o)

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
				lo, hi := in.n/2+i*(in.n/2)/chunks, in.n/2+(i+1)*(in.n/2)/chunks
				if !tg.produce(t, in, lo, hi) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		waitFor(t, 60*time.Second, "both instances to commit", func() bool {
			return a.p.Stats().Commits > 0 && b.p.Stats().Commits > 0
		})
		waitFor(t, 60*time.Second, "a third of the input to commit", func() bool { return sumConsumed(a, b) >= uint64(in.n/3) })
		a.stop(t)
		close(aStopped)
		waitClosed(t, produced, feedTimeout, "the input feeder to write the second half of the input")
		tg.waitCaughtUp(t, group, in.topic, b)
		b.stop(t)

		t.Logf("%s: %s", tg.Name, fmtStats(a, b))
		if got := sumConsumed(a, b); got != uint64(in.n) {
			t.Errorf("committed input records summed over instances = %d, want %d", got, in.n)
		}
		checkExactlyOnce(t, in, tg.readAll(t, out, true))
		tg.audit(t, group, []string{in.topic}, []string{out})
		if !tg.caughtUp(t, group, in.topic) {
			t.Error("committed offsets differ from the input's end offsets after shutdown")
		}
	})
}

// An aborted transaction leaves nothing visible to read_committed, and its
// input is processed again.
func TestAbortedTransactionInvisibleAndReprocessed(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("abort-in"), n: 3000, keys: 50}
		out, group := unique("abort-out"), unique("abort-group")
		tg.createTopics(t, 3, in.topic, out)
		tg.produce(t, in, 0, in.n)

		a := tg.start(t, instanceOpts{group: group, txnID: group + "-a", topics: []string{in.topic}, out: out,
			maxRecords: 500,
			// Abort the first three transactions.
			injectAbort: func(seq uint64) bool { return seq <= 3 },
		})
		tg.waitCaughtUp(t, group, in.topic, a)
		a.stop(t)

		if got := testutil.ToFloat64(a.tm.Aborted.WithLabelValues(string(txn.ReasonInjected))); got != 3 {
			t.Errorf("aborted{reason=injected} = %v, want 3", got)
		}
		checkExactlyOnce(t, in, tg.readAll(t, out, true))
		tg.audit(t, group, []string{in.topic}, []string{out})
		// The aborted records were written: a read_uncommitted reader sees
		// them, a read_committed one (above) does not.
		if dirty := tg.readAll(t, out, false); len(dirty) <= in.n {
			t.Errorf("read_uncommitted sees %d records, want more than the %d committed ones", len(dirty), in.n)
		}
	})
}

// A second instance with the same transactional ID fences the first. The
// instances fence each other until one has been fenced twice, and that one
// stops with a FencedError naming the ID; the survivor finishes the work
// and the output is still exactly once.
func TestSameTransactionalIDFences(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("fence-in"), n: 20_000, keys: 100}
		out, group := unique("fence-out"), unique("fence-group")
		tg.createTopics(t, 3, in.topic, out)
		tg.produce(t, in, 0, in.n/4)

		o := instanceOpts{group: group, txnID: group + "-shared", topics: []string{in.topic}, out: out, maxRecords: 200}
		a := tg.start(t, o)
		waitFor(t, 30*time.Second, "the first instance to commit", func() bool { return a.p.Stats().Commits > 0 })
		b := tg.start(t, o)

		// Keep input flowing so both keep producing and meet the fence.
		stopFeed := make(chan struct{})
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			step := (in.n * 3 / 4) / 200 // about 10 s of input, so both keep meeting the fence
			for i := in.n / 4; i < in.n; i += step {
				select {
				case <-stopFeed:
					tg.produce(t, in, i, in.n)
					return
				case <-t.Context().Done(): // the test failed before an instance stopped fenced
					return
				case <-time.After(50 * time.Millisecond):
				}
				if !tg.produce(t, in, i, min(i+step, in.n)) {
					return
				}
			}
		}()
		var loser, winner *instance
		waitFor(t, 60*time.Second, "one instance to stop fenced", func() bool {
			for _, c := range [][2]*instance{{a, b}, {b, a}} {
				select {
				case <-c[0].done:
					loser, winner = c[0], c[1]
					return true
				default:
				}
			}
			return false
		})
		close(stopFeed)
		waitClosed(t, fed, feedTimeout, "the input feeder to write the rest of the input after the fencing")
		var fe *txn.FencedError
		if !errors.As(loser.err, &fe) || fe.TransactionalID != o.txnID {
			t.Fatalf("the stopped instance returned %v, want a FencedError for %q", loser.err, o.txnID)
		}
		loser.stopped = true
		if n := testutil.ToFloat64(loser.tm.Fenced); n < 2 {
			t.Errorf("loser's producer_fenced_total = %v, want at least 2", n)
		}
		tg.waitCaughtUp(t, group, in.topic, winner)
		winner.stop(t)
		checkExactlyOnce(t, in, tg.readAll(t, out, true))
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
			tg := newFake(t)
			in := input{topic: unique("fault-in"), n: 4000, keys: 40}
			out, group := unique("fault-out"), unique("fault-group")
			tg.createTopics(t, 3, in.topic, out)
			tg.produce(t, in, 0, in.n/2)
			a := tg.start(t, instanceOpts{group: group, txnID: group + "-a", topics: []string{in.topic}, out: out, maxRecords: 300})
			waitFor(t, 30*time.Second, "a first commit", func() bool { return a.p.Stats().Commits > 0 })
			f := kfake.Fault{Keys: []kmsg.Key{c.key}, Err: c.err, TopLevel: c.topLevel}
			if c.key == kmsg.Produce {
				f.Topic = out // not the test's own input
			}
			h := tg.Fake.Fault(f)
			tg.produce(t, in, in.n/2, in.n)
			tg.waitCaughtUp(t, group, in.topic, a)
			a.stop(t)
			if h.Hits() == 0 {
				t.Errorf("the fault was never hit")
			}
			checkExactlyOnce(t, in, tg.readAll(t, out, true))
			tg.audit(t, group, []string{in.topic}, []string{out})
		})
	}
}
