package txn

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The session tracks its assignment and generation through the group's
// callbacks: all partitions while alone, half once a second member joins,
// with a newer generation.
func TestAssignedFollowsTheGroup(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 4)
	c.produce(t, "in", 40)
	a := c.session(t, "g", "tx-a", []string{"in"}, nil)
	a.init(t)
	a.pollN(t, 40)
	if got := a.Assigned(); !slices.Equal(got["in"], []int32{0, 1, 2, 3}) || len(got) != 1 {
		t.Fatalf("Assigned() alone = %v, want in: [0 1 2 3]", got)
	}
	member, gen := a.Member()
	if member == "" || gen <= 0 {
		t.Fatalf("Member() = %q, %d", member, gen)
	}

	b := c.session(t, "g", "tx-b", []string{"in"}, nil)
	b.init(t)
	t.Cleanup(pollInBackground(b))
	stop := pollInBackground(a)
	waitFor(t, "a and b to hold two partitions each", func() bool { return len(a.Assigned()["in"]) == 2 && len(b.Assigned()["in"]) == 2 })
	stop()
	if _, gen2 := a.Member(); gen2 <= gen {
		t.Errorf("generation %d after the rebalance, was %d", gen2, gen)
	}
	both := append(a.Assigned()["in"], b.Assigned()["in"]...)
	slices.Sort(both)
	if !slices.Equal(both, []int32{0, 1, 2, 3}) {
		t.Errorf("a and b hold %v together, want each partition once", both)
	}
}

// CommittedOffsets are the offsets the last committed transaction
// committed: past every record polled, and unchanged by an abort.
func TestCommittedOffsets(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 2)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 30)
	f := c.session(t, "g", "tx", []string{"in"}, nil)
	f.init(t)
	in := f.pollN(t, 30)
	f.begin(t)
	f.copyTo("out", in)
	if !f.end(t, len(in), "") {
		t.Fatal("the transaction did not commit")
	}
	want := map[int32]int64{}
	for _, r := range in {
		want[r.Partition] = max(want[r.Partition], r.Offset+1)
	}
	if got := f.CommittedOffsets()["in"]; !maps.Equal(got, want) {
		t.Errorf("CommittedOffsets() = %v, want %v", got, want)
	}
	var sum int64
	for _, o := range want {
		sum += o
	}
	if g := c.committedOffsets("g", "in"); g != sum {
		t.Errorf("the group committed %d in all, the session says %d", g, sum)
	}

	c.produce(t, "in", 10)
	more := f.pollN(t, 10)
	f.begin(t)
	f.copyTo("out", more)
	if f.end(t, len(more), ReasonInjected) {
		t.Fatal("the aborted transaction committed")
	}
	if got := f.CommittedOffsets()["in"]; !maps.Equal(got, want) {
		t.Errorf("CommittedOffsets() after an abort = %v, want still %v", got, want)
	}
}

// EndOffsets gives each partition's log-end and last stable offset: equal
// for plain records, apart while a transaction is open, and equal again
// (past its commit marker) once it commits.
func TestEndOffsets(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 2)
	c.createTopic(t, "tx", 1)
	c.produce(t, "in", 10)
	f := c.session(t, "g", "tx-a", []string{"in"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := f.EndOffsets(ctx, []string{"in", "tx"})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for p, e := range ends["in"] {
		if e.LogEnd != e.LastStable {
			t.Errorf("in/%d: %+v, want equal offsets for plain records", p, e)
		}
		sum += e.LogEnd
	}
	if sum != 10 || len(ends["in"]) != 2 || ends["tx"][0] != (Ends{}) {
		t.Errorf("EndOffsets = %v, want 10 records over in's 2 partitions and an empty tx", ends)
	}

	// A transactional producer leaves 5 records undecided, then commits.
	p, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.TransactionalID("upstream"), kgo.DefaultProduceTopic("tx"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if ends, err = f.EndOffsets(ctx, []string{"tx"}); err != nil || ends["tx"][0] != (Ends{LogStart: 0, LogEnd: 5, LastStable: 0}) {
		t.Errorf("with a transaction open: %v, %v; want log end 5, last stable 0", ends, err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the commit marker", func() bool {
		ends, err = f.EndOffsets(ctx, []string{"tx"})
		return err == nil && ends["tx"][0] == Ends{LogEnd: 6, LastStable: 6}
	})
}

// Log start offsets follow deletions: records deleted from the front of a
// partition move its log start.
func TestEndOffsetsLogStart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.produce(t, "in", 10)
	f := c.session(t, "g", "tx-a", []string{"in"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := f.admin.DeleteRecords(ctx, kadm.Offsets{"in": {0: kadm.Offset{Topic: "in", Partition: 0, At: 4}}}); err != nil {
		t.Fatal(err)
	}
	ends, err := f.EndOffsets(ctx, []string{"in"})
	if err != nil || ends["in"][0] != (Ends{LogStart: 4, LogEnd: 10, LastStable: 10}) {
		t.Errorf("EndOffsets = %v, %v; want log start 4, end 10", ends, err)
	}
	if g, id := f.Identity(); g != "g" || id != "tx-a" {
		t.Errorf("Identity() = %q, %q", g, id)
	}
}

// The status a page reads without scraping: the open transaction's start
// (and processor_transaction_open_age_seconds), the last commit's time,
// and aborts by reason with the last one.
func TestTransactionStatus(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 5)
	f := c.session(t, "g", "tx", []string{"in"}, nil)
	f.init(t)
	in := f.pollN(t, 5)
	if !f.m.OpenSince().IsZero() || gauge(t, f, "processor_transaction_open_age_seconds") != 0 {
		t.Error("a transaction counts as open before Begin")
	}
	f.begin(t)
	time.Sleep(20 * time.Millisecond)
	if since := f.m.OpenSince(); since.IsZero() || time.Since(since) < 20*time.Millisecond {
		t.Errorf("OpenSince() = %v while open", since)
	}
	if age := gauge(t, f, "processor_transaction_open_age_seconds"); age < 0.02 {
		t.Errorf("open age %v s, want at least 0.02", age)
	}
	f.copyTo("out", in)
	before := time.Now()
	if !f.end(t, 5, "") {
		t.Fatal("did not commit")
	}
	if last := gauge(t, f, "processor_last_commit_timestamp_seconds"); last < float64(before.Unix()) || last > float64(time.Now().Unix()+1) {
		t.Errorf("last commit timestamp %v, want about %v", last, before.Unix())
	}
	if !f.m.OpenSince().IsZero() || gauge(t, f, "processor_transaction_open_age_seconds") != 0 {
		t.Error("a transaction counts as open after End")
	}
	if counts, last := f.m.Aborts(); len(counts) != 0 || last != nil {
		t.Errorf("Aborts() = %v, %v before any abort", counts, last)
	}
	for _, r := range []Reason{ReasonInjected, ReasonWatchdog, ReasonInjected} {
		f.begin(t)
		f.copyTo("out", in)
		f.end(t, 5, r)
	}
	counts, last := f.m.Aborts()
	if counts[ReasonInjected] != 2 || counts[ReasonWatchdog] != 1 || len(counts) != 2 {
		t.Errorf("Aborts() = %v, want 2 injected and 1 watchdog", counts)
	}
	if last == nil || last.Reason != ReasonInjected || time.Since(last.At) > 10*time.Second {
		t.Errorf("last abort = %+v", last)
	}
}

// gauge reads one unlabelled gauge from the fixture's registry.
func gauge(t *testing.T, f *fixture, name string) float64 {
	t.Helper()
	return f.metric(t, name).GetGauge().GetValue()
}
