package txn

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// committedMeta returns the group's committed offset of topic's partition
// 0 and its metadata, as read.
func committedMeta(t *testing.T, c *kafkatest.Cluster, group, topic string) (int64, Progress) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resps, err := c.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetching the offsets of %s: %v", group, err)
	}
	o, ok := resps.Lookup(topic, 0)
	if !ok {
		return -1, Progress{}
	}
	return o.At, ParseProgress(o.Metadata)
}

// produceDigits writes ten records, "0" to "9", to partition 0 of topic.
func produceDigits(t *testing.T, c *kafkatest.Cluster, topic string) {
	t.Helper()
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte{byte('0' + i)}})
	}
	c.ProduceSync(t, rs)
}

// crashSession starts a session of group on topic that counts crash
// attempts up to max, with the guarantee g.
func crashSession(t *testing.T, c *kafkatest.Cluster, g Guarantee, group, topic string, max int) *fixture {
	t.Helper()
	cl := &cluster{Cluster: c, fake: c.Fake, brokers: c.Brokers}
	f := cl.session(t, group, group+"-txn", []string{topic}, func(o *Options) { o.MaxCrashAttempts, o.Guarantee = max, g })
	f.init(t)
	return f
}

// die ends f as a process killed mid-transaction would: nothing is
// written back, as f forgets its live markers first. (The client still
// ends its batch and leaves the group, which only makes the next
// member's join quicker.)
func (f *fixture) die(t *testing.T) {
	t.Helper()
	f.crash.mu.Lock()
	for _, a := range f.crash.parts {
		a.live = false
	}
	f.crash.mu.Unlock()
	f.stop(t)
}

// stop ends f gracefully with its polled records uncommitted: the batch
// is aborted (at least once, a batch left open would hold up the
// rebalance the leave starts), then the session closed.
func (f *fixture) stop(t *testing.T) {
	t.Helper()
	f.begin(t)
	f.end(t, 0, ReasonInjected)
	f.Close()
}

// pollRun polls until it has n records, telling the session before each
// poll's records would run (Attempt), as the pipeline does.
func (f *fixture) pollRun(t *testing.T, n int) []*kgo.Record {
	t.Helper()
	return f.poll(t, n, true)
}

// commitOne runs rs (already polled) in a transaction that commits.
func (f *fixture) commitOne(t *testing.T, rs []*kgo.Record) {
	t.Helper()
	f.begin(t)
	if !f.end(t, len(rs), "") {
		t.Fatal("the transaction did not commit")
	}
}

// The protocol of crash attempts, read from the committed offset's
// metadata after each step: every process that dies between polling and
// committing, first thing after its assignment, counts one attempt at the
// committed offset; at the limit the records run alone, each named in a
// marker first; the next process finds the one a process died on and
// hands it over as a culprit; progress clears the count (and ends the
// markers until the next assignment), and a graceful stop takes its
// attempt back.
func TestCrashAttemptsProtocol(t *testing.T) {
	t.Parallel()
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) { crashAttemptsProtocol(t, g) })
	}
}

func crashAttemptsProtocol(t *testing.T, g Guarantee) {
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("crash-in"), kafkatest.Unique("crash-group")
		c.CreateTopics(t, 1, nil, topic)
		produceDigits(t, c, topic)
		// want waits for the group's offset to be as given: a
		// transaction's offsets are the group's once its markers are
		// written, which Kafka does after it answers EndTxn.
		want := func(step string, at int64, p Progress) {
			t.Helper()
			waitCommitted(t, c, group, topic, step, at, p)
		}

		// A process that dies after polling but before its records run
		// (in a state restore, say) counts nothing.
		f := crashSession(t, c, g, group, topic, 2)
		f.pollN(t, 10)
		f.die(t)
		want("died before running", -1, Progress{})

		for i := 1; i <= 2; i++ { // two processes die on the batch from offset 0
			f := crashSession(t, c, g, group, topic, 2)
			f.pollRun(t, 10)
			want("polled", 0, Progress{Crashes: i, At: 0, Extent: 9})
			if f.Solo() {
				t.Fatalf("process %d: solo before the limit", i)
			}
			f.die(t)
		}

		f = crashSession(t, c, g, group, topic, 2) // at the limit: one at a time
		first := f.pollRun(t, 1)
		if !f.Solo() {
			t.Fatal("not solo at the limit")
		}
		want("first alone", 0, Progress{Crashes: 2, At: 0, Extent: 9, Solo: 0, Alone: true})
		f.commitOne(t, first)
		want("first committed", 1, Progress{Crashes: 2, At: 1, Extent: 9})
		if r := f.pollRun(t, 1); r[0].Offset != 1 {
			t.Fatalf("polled offset %d, want 1", r[0].Offset)
		}
		want("second alone", 1, Progress{Crashes: 2, At: 1, Extent: 9, Solo: 1, Alone: true})
		f.die(t) // offset 1 killed it

		f = crashSession(t, c, g, group, topic, 2)
		r := f.pollRun(t, 1)
		culprits := f.TakeCulprits()
		if len(culprits) != 1 || culprits[0] != (Culprit{Topic: topic, Partition: 0, Offset: 1, Crashes: 3}) || r[0].Offset != 1 {
			t.Fatalf("culprits %+v after polling offset %d, want offset 1 with 3 crashes", culprits, r[0].Offset)
		}
		want("culprit polled", 1, Progress{Crashes: 2, At: 1, Extent: 9, Solo: 1, Alone: true})
		f.commitOne(t, r)
		want("culprit committed", 2, Progress{})
		if f.Solo() {
			t.Fatal("still solo past the culprit")
		}
		f.pollRun(t, 8)
		want("polled after a commit", 2, Progress{}) // only an assignment's first attempt is counted
		f.stop(t)

		f = crashSession(t, c, g, group, topic, 2)
		f.pollRun(t, 8)
		want("next batch polled", 2, Progress{Crashes: 1, At: 2, Extent: 9})
		f.stop(t) // graceful: its attempt is taken back
		want("graceful stop", 2, Progress{})

		f = crashSession(t, c, g, group, topic, 2)
		f.commitOne(t, f.pollRun(t, 8))
		want("all committed", 10, Progress{})
		f.Close()
	})
}

// A partition taken away by a rebalance has not crashed: its new owner
// counts one attempt, not two. And an aborted transaction is no crash
// either: the same process polling the same records again counts nothing.
func TestCrashAttemptsRebalance(t *testing.T) {
	t.Parallel()
	g := ExactlyOnce
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("crash-rb-in"), kafkatest.Unique("crash-rb-group")
		c.CreateTopics(t, 2, nil, topic)
		var rs []*kgo.Record
		for i := range 20 {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte{byte('a' + i)}})
		}
		c.ProduceSync(t, rs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		counts := func() map[int32]int {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resps, err := c.Admin(t).FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			out := map[int32]int{}
			for p := range int32(2) {
				if o, ok := resps.Lookup(topic, p); ok {
					out[p] = ParseProgress(o.Metadata).crashesAt(o.At)
				}
			}
			return out
		}

		a := crashSession(t, c, g, group, topic, 3)
		a.begin(t)
		a.pollRun(t, 20)
		a.end(t, 20, ReasonInjected) // aborted: both partitions are polled again
		a.begin(t)
		a.pollRun(t, 20)
		if got := counts(); got[0] != 1 || got[1] != 1 {
			t.Fatalf("after polling both partitions twice in one process: counts %v, want 1 each", got)
		}
		b := crashSession(t, c, g, group, topic, 3)
		got := b.pollRun(t, 10) // the partition the rebalance gives it
		a.end(t, 20, ReasonInjected)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			n := counts()
			if n[got[0].Partition] == 1 && n[1-got[0].Partition] == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("counts %v after partition %d moved to another member, want 1 each", n, got[0].Partition)
			}
		}
	})
}

// A session fenced by another producer with its transactional ID, or
// failing to end a transaction, is rebuilt: the process is alive, and its
// attempt is no crash. Nor does it count for whichever member polls the
// partition next: a rebuild takes the attempt back once the broker's
// committed offsets, read stable, show the transaction did not move them,
// and so does a stop after a second fence. (Two instances sharing a
// transactional ID once counted each other's fences up to a culprit, and
// failed a record nothing was wrong with.)
func TestCrashAttemptsFenced(t *testing.T) {
	t.Parallel()
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("crash-fence-in"), kafkatest.Unique("crash-fence-group")
		other := kafkatest.Unique("crash-fence-other")
		c.CreateTopics(t, 1, nil, topic, other)
		produceDigits(t, c, topic)
		want := func(step string, at int64, p Progress) {
			t.Helper()
			waitCommitted(t, c, group, topic, step, at, p)
		}
		// fence starts a session of another group with a's transactional
		// ID: its producer's initialisation fences a's.
		cl := &cluster{Cluster: c, fake: c.Fake, brokers: c.Brokers}
		fence := func() {
			z := cl.session(t, group+"-z", group+"-txn", []string{other}, nil)
			z.init(t)
			z.Close()
		}

		// One real death first: what a rebuild writes back is the count
		// from before its own marker, not nothing.
		d := crashSession(t, c, ExactlyOnce, group, topic, 3)
		d.pollRun(t, 10)
		d.die(t)
		died := Progress{Crashes: 1, At: 0, Extent: 9}
		want("died once", 0, died)

		a := crashSession(t, c, ExactlyOnce, group, topic, 3)
		a.begin(t)
		a.pollRun(t, 10)
		want("polled", 0, Progress{Crashes: 2, At: 0, Extent: 9})
		fence()
		if a.end(t, 10, "") {
			t.Fatal("a fenced transaction committed")
		}
		want("fenced and rebuilt", 0, died)
		a.begin(t)
		a.pollRun(t, 10)
		want("polled again after the rebuild", 0, Progress{Crashes: 2, At: 0, Extent: 9})
		fence()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var fe *FencedError
		if _, err := a.End(ctx, 10, ""); !errors.As(err, &fe) {
			t.Fatalf("End after a second fence: %v, want a *FencedError", err)
		}
		a.Close()
		want("stopped fenced", 0, died)
	})
}

// commitCounter counts the plain OffsetCommit requests a client writes.
type commitCounter struct{ n atomic.Int32 }

func (c *commitCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if kmsg.Key(key) == kmsg.OffsetCommit && err == nil {
		c.n.Add(1)
	}
}

// Counting costs one offset commit at a partition's first poll, and
// nothing per transaction after it: twenty transactions of a running
// process write the one marker, none more.
//
// On Kafka a transaction begun right after a commit may have its offset
// commit refused while the last one's markers are still being written
// (franz-go aborts it, reason offset_commit): its record is then polled
// and run again, as the pipeline does, and the aborted attempts count
// towards the cost too.
func TestCrashAttemptsCost(t *testing.T) {
	t.Parallel()
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("crash-cost-in"), kafkatest.Unique("crash-cost-group")
		c.CreateTopics(t, 1, nil, topic)
		var commits commitCounter
		cl := &cluster{Cluster: c, fake: c.Fake, brokers: c.Brokers}
		f := cl.session(t, group, group+"-txn", []string{topic}, func(o *Options) {
			o.MaxCrashAttempts = 3
			o.ClientOpts = append(o.ClientOpts, kgo.WithHooks(&commits))
		})
		f.init(t)
		for i := range 20 {
			c.ProduceSync(t, []*kgo.Record{{Topic: topic, Value: []byte{byte(i)}}})
			for attempt := 1; ; attempt++ {
				rs := f.pollRun(t, 1) // after an abort, the same record again
				f.begin(t)
				if f.end(t, len(rs), "") {
					break
				}
				if attempt == 5 {
					t.Fatalf("transaction %d aborted %d times (aborts: %v offset_commit of %v)", i, attempt, f.aborted(ReasonOffsetCommit), f.abortedTotal())
				}
			}
		}
		if n := commits.n.Load(); n != 1 {
			t.Errorf("%d offset commits besides the transactions' over 20 transactions, want 1 (the marker at the first poll)", n)
		}
		if oc, all := f.aborted(ReasonOffsetCommit), f.abortedTotal(); oc != all {
			t.Errorf("%v transactions aborted, %v of them for their offset commit; want no other reason", all, oc)
		} else if all > 0 {
			t.Logf("%v transactions aborted for their offset commit, run again", all)
		}
		f.Close()
	})
}

// waitCommitted waits for group's committed offset of topic's partition 0
// to be at with progress p: a transaction's offsets are the group's once
// its markers are written, which Kafka does after it answers EndTxn.
func waitCommitted(t *testing.T, c *kafkatest.Cluster, group, topic, step string, at int64, p Progress) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		gotAt, got := committedMeta(t, c, group, topic)
		if gotAt == at && got.String() == p.String() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: committed %d %q, want %d %q", step, gotAt, got.String(), at, p.String())
		}
	}
}
