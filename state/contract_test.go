package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// restoreBound is how long a restore in these tests may take: far more
// than they need, and far less than forever.
const restoreBound = 30 * time.Second

// rig is one store ("s") of a group of its own on a cluster, and what its
// changelog holds as the test wrote it: the reference a restored store is
// compared with.
type rig struct {
	t       *testing.T
	c       *kafkatest.Cluster
	group   string
	topic   string
	dir     string
	parts   int32
	batch   int // Options.RestoreBatch
	prod    *kgo.Client
	written []logged // committed writes, in offset order per partition
}

// logged is one committed changelog record; val nil for a tombstone.
type logged struct {
	p        int32
	off      int64
	key, val string
	tomb     bool
}

func newRig(t *testing.T, c *kafkatest.Cluster, parts int32, configs map[string]string) *rig {
	t.Helper()
	g := kafkatest.Unique("restore")
	r := &rig{t: t, c: c, group: g, topic: ChangelogTopic(g, "s"), dir: filepath.Join(t.TempDir(), "state"), parts: parts}
	if configs != nil {
		configs["cleanup.policy"] = "compact"
		c.CreateTopics(t, parts, configs, r.topic)
	}
	r.prod = c.Client(t, kgo.TransactionalID(kafkatest.Unique("restore-producer")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Second))
	return r
}

// manager opens the store and ensures its changelog, without restoring.
func (r *rig) manager() *Manager {
	r.t.Helper()
	m, err := Open(Options{Dir: r.dir, Group: r.group, Stores: []string{"s"}, ClientOpts: r.c.ClientOpts(), RestoreBatch: r.batch})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = m.Close() })
	if err := m.EnsureChangelogs(ctx(r.t), kadm.NewClient(r.c.Client(r.t)), r.parts); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// open opens the store and restores every partition within restoreBound.
func (r *rig) open() *Manager {
	r.t.Helper()
	m := r.manager()
	c, cancel := context.WithTimeout(context.Background(), restoreBound)
	defer cancel()
	if err := m.Restore(c, r.all()); err != nil {
		r.t.Fatalf("restore: %v (status %+v)", err, m.Status())
	}
	return m
}

func (r *rig) all() []int32 {
	var ps []int32
	for p := range r.parts {
		ps = append(ps, p)
	}
	return ps
}

// commit writes kv (key -> value, "" a deletion) to partition p through
// the manager: a Kafka transaction, then the local Commit.
func (r *rig) commit(m *Manager, p int32, kv map[string]string) {
	r.t.Helper()
	tx, err := m.Begin()
	if err != nil {
		r.t.Fatal(err)
	}
	s := store(r.t, tx, "s", p)
	for k, v := range kv {
		if v == "" {
			err = s.Delete([]byte(k))
		} else {
			err = s.Put([]byte(k), []byte(v), time.Time{})
		}
		if err != nil {
			r.t.Fatal(err)
		}
	}
	r.kafka(tx.Records(), true)
	if err := tx.Commit(); err != nil {
		r.t.Fatal(err)
	}
}

// behind writes kv to partition p in a Kafka transaction alone, committed
// or aborted: what a processor killed before its local Commit leaves.
func (r *rig) behind(p int32, kv map[string]string, commit bool) {
	r.t.Helper()
	var recs []*kgo.Record
	for k, v := range kv {
		rec := &kgo.Record{Topic: r.topic, Partition: p, Key: []byte(k)}
		if v != "" {
			rec.Value = encodeValue(0, []byte(v))
		}
		recs = append(recs, rec)
	}
	r.kafka(recs, commit)
}

// kafka produces recs in one transaction, and logs them if it commits.
func (r *rig) kafka(recs []*kgo.Record, commit bool) {
	r.t.Helper()
	c := ctx(r.t)
	if err := r.prod.BeginTransaction(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.prod.ProduceSync(c, recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.prod.EndTransaction(c, kgo.TransactionEndTry(commit)); err != nil {
		r.t.Fatal(err)
	}
	if !commit {
		return
	}
	for _, rec := range recs {
		l := logged{p: rec.Partition, off: rec.Offset, key: string(rec.Key), tomb: rec.Value == nil}
		if !l.tomb {
			l.val = string(rec.Value[8:])
		}
		r.written = append(r.written, l)
	}
}

// want is partition p as the changelog holds it from offset from on: the
// last committed value of each key, deleted keys absent.
func (r *rig) want(p int32, from int64) map[string]string {
	out := map[string]string{}
	for _, l := range r.written {
		switch {
		case l.p != p || l.off < from:
		case l.tomb:
			delete(out, l.key)
		default:
			out[l.key] = l.val
		}
	}
	return out
}

// check compares the local store's partition p with want(p, from), and
// its counted keys.
func (r *rig) check(m *Manager, p int32, from int64) {
	r.t.Helper()
	got := localData(r.t, m, part{r.topic, p})
	want := r.want(p, from)
	if !maps.Equal(got, want) {
		r.t.Fatalf("partition %d holds %d keys, the changelog %d: got %v, want %v", p, len(got), len(want), trim(got), trim(want))
	}
	if st := status(r.t, m, "s", p); !st.Ready || st.Keys != int64(len(want)) {
		r.t.Fatalf("partition %d: status %+v, want ready with %d keys", p, st, len(want))
	}
}

// trim keeps a failure message short.
func trim(m map[string]string) string {
	if len(m) > 10 {
		return fmt.Sprintf("(%d keys)", len(m))
	}
	return fmt.Sprint(m)
}

// localData reads every data entry of p from the local store, values without
// their expiry.
func localData(t *testing.T, m *Manager, p part) map[string]string {
	t.Helper()
	pre := dataKey(p.prefix(), nil)
	it, err := m.db.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: append(p.prefix(), kindData+1)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		out[string(bytes.TrimPrefix(it.Key(), pre))] = string(it.Value()[8:])
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// keys returns n keys "prefix-i" with value v.
func keys(prefix string, n int, v string) map[string]string {
	out := make(map[string]string, n)
	for i := range n {
		out[fmt.Sprintf("%s-%d", prefix, i)] = v
	}
	return out
}

// TestRestoreContract: a restore is done when its fetch position reached
// the end taken when it began, whatever the last record was. Each shape
// of a changelog that leaves other processors "restoring" forever must
// restore, within restoreBound, to what the changelog holds.
func TestRestoreContract(t *testing.T) {
	kafkatest.ForEach(t, []kfake.Opt{kfake.NumBrokers(1)}, func(t *testing.T, c *kafkatest.Cluster) {
		t.Run("empty", func(t *testing.T) { restoreEmpty(t, c) })
		t.Run("marker-tail", func(t *testing.T) { restoreMarkerTail(t, c) })
		t.Run("below-log-start", func(t *testing.T) { restoreBelowLogStart(t, c) })
		t.Run("start-moved-under-the-restore", func(t *testing.T) { restoreStartMoved(t, c) })
		t.Run("rebalance-mid-restore", func(t *testing.T) { restoreInterrupted(t, c) })
		t.Run("compacted-tail", func(t *testing.T) {
			if c.Fake != nil {
				t.Skip("kfake does not compact")
			}
			restoreCompactedTail(t, c)
		})
	})
}

// An empty changelog, with and without a local store.
func restoreEmpty(t *testing.T, c *kafkatest.Cluster) {
	r := newRig(t, c, 2, nil)
	m := r.open()
	r.check(m, 0, 0)
	r.check(m, 1, 0)
	_ = m.Close()
	m = r.open()
	r.check(m, 1, 0)
}

// A tail that is only a transaction marker: a commit's (the checkpoint of
// a local Commit points at it), an aborted transaction's, and a committed
// transaction's records followed by an aborted one.
func restoreMarkerTail(t *testing.T, c *kafkatest.Cluster) {
	r := newRig(t, c, 1, nil)
	m := r.open()
	r.commit(m, 0, keys("a", 5, "1"))
	_ = m.Close()
	m = r.open() // from the commit marker: it alone
	r.check(m, 0, 0)
	if st := status(t, m, "s", 0); st.RestoredRecords != 0 || st.Rebuilt {
		t.Fatalf("after a clean close: %+v, want nothing read", st)
	}
	_ = m.Close()
	r.behind(0, keys("a", 5, "aborted"), false)
	m = r.open() // the marker, an aborted transaction, its marker
	r.check(m, 0, 0)
	_ = m.Close()
	r.behind(0, keys("b", 3, "2"), true)
	r.behind(0, keys("b", 3, "aborted"), false)
	m = r.open() // a committed transaction, then an aborted one: its marker ends the log
	r.check(m, 0, 0)
	if st := status(t, m, "s", 0); st.RestoredRecords != 3 {
		t.Fatalf("status %+v, want the 3 records of the committed tail read", st)
	}
	_ = m.Close()
	if err := os.RemoveAll(r.dir); err != nil {
		t.Fatal(err)
	}
	m = r.open() // rebuilt, through every marker
	r.check(m, 0, 0)
}

// A checkpoint below the log start: records deleted (DeleteRecords) past
// it. The partition is rebuilt from the new start, and holds what the
// changelog holds from there.
func restoreBelowLogStart(t *testing.T, c *kafkatest.Cluster) {
	r := newRig(t, c, 1, nil)
	m := r.open()
	r.commit(m, 0, keys("old", 10, "1"))
	_ = m.Close()
	r.behind(0, keys("old", 10, "2"), true)
	r.behind(0, keys("new", 10, "3"), true)
	cut := r.written[len(r.written)-10].off // the first record of the last transaction
	// Kafka deletes records of a topic with the delete policy only: the
	// changelog has it for the deletion, as if retention had deleted them.
	deleteBefore(t, c, r.topic, cut)
	m = r.open()
	if st := status(t, m, "s", 0); !st.Rebuilt || st.RestoredRecords != 10 {
		t.Fatalf("status %+v, want rebuilt from the 10 records after the log start", st)
	}
	r.check(m, 0, cut)
}

// deleteBefore deletes the records of partition 0 of topic before cut.
// Kafka deletes records of a topic with the delete policy only: the
// changelog has it for the deletion, as if retention had deleted them.
func deleteBefore(t *testing.T, c *kafkatest.Cluster, topic string, cut int64) {
	t.Helper()
	policy(t, c, topic, "compact,delete")
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: cut})
	// The broker applies a topic's new configuration a moment after it
	// acknowledges it: until then the topic is compacted only, and
	// DeleteRecords is refused with POLICY_VIOLATION.
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var resp kadm.DeleteRecordsResponses
		if resp, err = c.Admin(t).DeleteRecords(ctx(t), del); err == nil {
			err = resp.Error()
		}
		if !errors.Is(err, kerr.PolicyViolation) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("deleting the records before %d: %v", cut, err)
	}
	policy(t, c, topic, "compact")
}

// Records deleted under a running restore, past its position: the fetch
// falls below the log start, and the partition is wiped and read again
// from the new start (counted as start_moved). The deletion lands between
// the restore's plan (its checkpoint valid then) and its reading.
func restoreStartMoved(t *testing.T, c *kafkatest.Cluster) {
	r := newRig(t, c, 1, nil)
	m := r.open()
	r.commit(m, 0, keys("old", 10, "1"))
	_ = m.Close()
	r.behind(0, keys("old", 10, "2"), true)
	r.behind(0, keys("new", 10, "3"), true)
	cut := r.written[len(r.written)-10].off
	m = r.manager()
	cl := r.c.Client(t)
	plan, err := m.plan(ctx(t), kadm.NewClient(cl), m.Topics(), []int32{0})
	if err != nil {
		t.Fatal(err)
	}
	if pr := plan[part{r.topic, 0}]; pr.rebuilt || pr.from >= cut {
		t.Fatalf("planned from %d (rebuilt %v), want from the checkpoint, below %d", pr.from, pr.rebuilt, cut)
	}
	deleteBefore(t, c, r.topic, cut)
	c2, cancel := context.WithTimeout(context.Background(), restoreBound)
	defer cancel()
	if err := m.read(c2, cl, plan); err != nil {
		t.Fatal(err)
	}
	m.finish(plan, 0)
	if st := status(t, m, "s", 0); !st.Rebuilt || st.RestoredRecords != 10 {
		t.Fatalf("status %+v, want rebuilt from the 10 records after the new start", st)
	}
	if n := testutil.ToFloat64(m.met.rebuilds.WithLabelValues("s", "start_moved")); n != 1 {
		t.Fatalf("processor_state_rebuilds_total{reason=start_moved} = %v, want 1", n)
	}
	r.check(m, 0, cut)
}

// policy sets topic's cleanup.policy.
func policy(t *testing.T, c *kafkatest.Cluster, topic, p string) {
	t.Helper()
	resp, err := c.Admin(t).AlterTopicConfigs(ctx(t), []kadm.AlterConfig{{Name: "cleanup.policy", Value: &p}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("setting cleanup.policy=%s on %s: %v", p, topic, err)
	}
}

// A rebalance in the middle of a restore: the restore of two partitions
// is interrupted after its first batches, the partitions revoked, one of
// them restored alone, then both. Each finishes where the changelog ends,
// the interrupted one resuming from the last batch it wrote.
func restoreInterrupted(t *testing.T, c *kafkatest.Cluster) {
	r := newRig(t, c, 2, nil)
	r.batch = 500
	m := r.manager()
	n := 50_000 // enough that the interruption lands mid-way
	if raceEnabled {
		n = 5_000 // the race detector slows the restore tenfold
	}
	for round := range 4 {
		for p := range r.parts {
			r.behind(p, keys(fmt.Sprint("k", p), n, fmt.Sprint(round)), true)
		}
	}
	r.behind(0, keys("k0", 100, ""), true) // deletions
	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Restore(cctx, r.all()) }()
	deadline := time.Now().Add(restoreBound)
	for time.Now().Before(deadline) {
		if st := m.Status(); len(st) == 2 && st[0].RestoredRecords+st[1].RestoredRecords > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	err := <-done
	total := int64(4*n + 100)
	first := status(t, m, "s", 0).RestoredRecords
	t.Logf("the interrupted restore read %d of %d records of partition 0: %v", first, total, err)
	if err == nil {
		t.Fatal("the restore finished before it was interrupted: the test needs more records")
	}
	m.Revoke(r.all())
	c1, cancel1 := context.WithTimeout(context.Background(), restoreBound)
	defer cancel1()
	if err := m.Restore(c1, []int32{1}); err != nil {
		t.Fatal(err)
	}
	r.check(m, 1, 0)
	c2, cancel2 := context.WithTimeout(context.Background(), restoreBound)
	defer cancel2()
	if err := m.Restore(c2, r.all()); err != nil {
		t.Fatal(err)
	}
	r.check(m, 0, 0)
	r.check(m, 1, 0)
	if again := status(t, m, "s", 0).RestoredRecords; again+first > total+int64(r.batch) {
		t.Fatalf("partition 0 read %d records after %d, of %d: not resumed from its last batch", again, first, total)
	}
}

// A tail removed by compaction: keys written and deleted after the
// checkpoint, on a changelog whose cleaner runs at once and keeps
// tombstones and markers no time, until the cleaner removed records of
// the tail; the restore from the checkpoint reads through the gaps.
func restoreCompactedTail(t *testing.T, c *kafkatest.Cluster) {
	r := newRig(t, c, 1, map[string]string{"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms": "100", "min.compaction.lag.ms": "0", "max.compaction.lag.ms": "100"})
	m := r.open()
	r.commit(m, 0, keys("base", 20, "1"))
	_ = m.Close()
	produced := len(r.written)
	for round := range 5 {
		r.behind(0, keys("gone", 20, fmt.Sprint(round)), true)
		time.Sleep(150 * time.Millisecond) // a segment each
		produced += 20
	}
	r.behind(0, keys("gone", 20, ""), true)
	produced += 20
	time.Sleep(150 * time.Millisecond)
	deadline := time.Now().Add(90 * time.Second)
	for left := countAll(t, c, r.topic); left >= produced; left = countAll(t, c, r.topic) {
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner left all %d records of %s within 90s", left, r.topic)
		}
		r.behind(0, keys("roll", 1, ""), false) // an aborted append rolls the active segment
		time.Sleep(time.Second)
	}
	t.Logf("the cleaner left %d of %d records", countAll(t, c, r.topic), produced)
	m = r.open()
	r.check(m, 0, 0)
	_ = m.Close()
	if err := os.RemoveAll(r.dir); err != nil {
		t.Fatal(err)
	}
	m = r.open() // rebuilt from the compacted log
	r.check(m, 0, 0)
}

// countAll counts the data records (read_uncommitted) a consumer reads
// from topic's start in 3 seconds.
func countAll(t *testing.T, c *kafkatest.Cluster, topic string) int {
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	n := 0
	for cctx.Err() == nil {
		cl.PollFetches(cctx).EachRecord(func(*kgo.Record) { n++ })
	}
	return n
}
