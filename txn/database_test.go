package txn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// The database mode's sessions against kfake and the real PostgreSQL of
// PROCESSOR_TEST_POSTGRES_URL, each test in a schema of its own.

// dbSession is a database-mode session of group g on db, whose group
// client gives up on a member that does not rejoin within 2s (so that a
// member stuck in a batch loses its partitions quickly, as a paused
// process would).
func (c *cluster) dbSession(t *testing.T, db *pgtest.DB, name string) (*fixture, *pgsink.Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := pgsink.Open(ctx, pgsink.Options{URL: db.URL, Group: "g", Metrics: pgsink.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatalf("opening the sink: %v", err)
	}
	t.Cleanup(sink.Close)
	f := c.session(t, "g", name, []string{"in"}, func(o *Options) {
		o.Destination, o.DestinationName = sink, "postgres"
		o.ClientOpts = append(o.ClientOpts, kgo.RebalanceTimeout(2*time.Second))
	})
	return f, sink
}

// postgresVar is the variable the processor reads a postgres setting
// from, as it names it in a *sink.PersistentError's line.
func postgresVar(setting string) string { return "PROCESSOR_POSTGRES_" + setting }

// writeRows produces one row per input record, as the pipeline does.
func (f *fixture) writeRows(in []*kgo.Record) {
	for _, r := range in {
		f.Produce(context.Background(), &kgo.Record{Key: r.Key, Value: []byte(`{"v":"` + string(r.Value) + `"}`)},
			record.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
	}
}

// checkRows fails unless the records table holds each of the n inputs
// exactly once and the offsets table says every partition is consumed
// to its end.
func checkRows(t *testing.T, c *cluster, db *pgtest.DB, n int) {
	t.Helper()
	if rows, distinct := db.Count(t, `SELECT count(*) FROM processor_records`),
		db.Count(t, `SELECT count(DISTINCT (src_topic, src_partition, src_offset)) FROM processor_records`); rows != n || distinct != n {
		t.Errorf("the table holds %d rows of %d inputs, want each of the %d inputs once", rows, distinct, n)
	}
	for p, end := range c.endOffsets(t, "in") {
		if got := db.Count(t, `SELECT next_offset FROM processor_offsets WHERE "group" = 'g' AND topic = 'in' AND "partition" = $1`, p); int64(got) != end {
			t.Errorf("partition %d: stored next offset %d, want its end offset %d", p, got, end)
		}
	}
}

// A batch commits its rows and offsets together; the group gets a copy of
// the offsets; an aborted batch writes nothing and its input comes again;
// a new session resumes from the stored offsets, which win over the
// group's.
func TestDatabaseCommitAndResume(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c := newCluster(t)
	c.createTopic(t, "in", 2)
	c.produce(t, "in", 20)
	a, _ := c.dbSession(t, db, "a")
	a.init(t)
	in := a.pollN(t, 20)
	a.begin(t)
	a.writeRows(in)
	if a.end(t, len(in), ReasonInjected) {
		t.Fatal("an aborted batch committed")
	}
	if n := db.Count(t, `SELECT count(*) FROM processor_records`); n != 0 {
		t.Fatalf("an aborted batch wrote %d rows", n)
	}
	again := a.pollN(t, 20)
	a.begin(t)
	a.writeRows(again)
	if !a.end(t, len(again), "") {
		t.Fatal("the batch did not commit")
	}
	checkRows(t, c, db, 20)
	if got := c.committedOffsets("g", "in"); got != 20 {
		t.Errorf("the group's committed offsets sum to %d, want the copy of the stored 20", got)
	}
	if got := a.CommittedOffsets()["in"]; got[0]+got[1] != 20 {
		t.Errorf("CommittedOffsets() = %v, want the stored offsets (20 in all)", got)
	}
	a.Close()

	// The stored offsets win: rewind the group's copy to the start, and a
	// new session still resumes after the 20.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := kadm.Offsets{}
	start.Add(kadm.Offset{Topic: "in", Partition: 0, At: 0})
	start.Add(kadm.Offset{Topic: "in", Partition: 1, At: 0})
	if _, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "g", start); err != nil {
		t.Fatalf("rewinding the group's offsets: %v", err)
	}
	c.produce(t, "in", 4)
	b, _ := c.dbSession(t, db, "b")
	b.init(t)
	more := b.pollN(t, 4)
	for _, r := range more {
		if r.Offset < 8 { // 20 records over 2 partitions: at least 8 in each before
			t.Errorf("resumed at %s/%d offset %d, before the stored offsets", r.Topic, r.Partition, r.Offset)
		}
	}
	b.begin(t)
	b.writeRows(more)
	if !b.end(t, len(more), "") {
		t.Fatal("the resumed batch did not commit")
	}
	checkRows(t, c, db, 24)
}

// zombie sets up a race: member a holds a batch of the 20 inputs written
// as rows, not yet ended, when member b joins; b's poll returns the same
// 20 once a, stuck, has lost every partition to it.
func zombie(t *testing.T) (c *cluster, db *pgtest.DB, a *fixture, in []*kgo.Record, b *fixture, got []*kgo.Record) {
	t.Helper()
	db = pgtest.New(t)
	c = newCluster(t)
	c.createTopic(t, "in", 2)
	c.produce(t, "in", 20)
	a, _ = c.dbSession(t, db, "a")
	a.init(t)
	in = a.pollN(t, 20)
	a.begin(t)
	a.writeRows(in)
	b, _ = c.dbSession(t, db, "b")
	b.init(t)
	return c, db, a, in, b, b.pollN(t, 20)
}

// A member stuck in a batch loses its partitions (it does not rejoin
// within the rebalance timeout, as a paused process would not). The new
// owner resumes from the stored offsets and commits; when the zombie wakes
// up and ends its batch, its database transaction rolls back (fenced),
// and every input is in the table once.
func TestDatabaseZombieRollsBack(t *testing.T) {
	t.Parallel()
	c, db, a, in, b, got := zombie(t)
	b.begin(t)
	b.writeRows(got)
	if !b.end(t, len(got), "") {
		t.Fatal("the new owner's batch did not commit")
	}

	if a.end(t, len(in), "") {
		t.Fatal("the zombie's batch committed")
	}
	if n := a.aborted(ReasonFenced); n != 1 {
		t.Errorf("aborted{fenced} = %v on the zombie, want 1", n)
	}
	if n := testutil.ToFloat64(a.m.Fenced); n != 1 {
		t.Errorf("the zombie's fenced counter = %v, want 1", n)
	}
	checkRows(t, c, db, 20)
}

// The zombie may also win the race: it commits before the new owner,
// which is then fenced, resumes from what the zombie stored, and finds
// nothing left to do. Every input is in the table once.
func TestDatabaseZombieFirstFencesNewOwner(t *testing.T) {
	t.Parallel()
	c, db, a, in, b, got := zombie(t)
	if !a.end(t, len(in), "") {
		t.Fatal("the zombie's batch did not commit, though no one had written")
	}
	b.begin(t)
	b.writeRows(got)
	if b.end(t, len(got), "") {
		t.Fatal("the new owner committed over the zombie's rows")
	}
	if n := b.aborted(ReasonFenced); n != 1 {
		t.Errorf("aborted{fenced} = %v on the new owner, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if fs := b.Poll(ctx, 100); fs.NumRecords() > 0 {
		t.Errorf("after the fence the new owner polled %d records, want none: it resumes from the stored offsets", fs.NumRecords())
	}
	checkRows(t, c, db, 20)
}

// A failure no row causes and no retry fixes (here the records table
// dropped under the running session) is retried MaxIdentical times, the
// session saying meanwhile that commits fail for a reason retrying does
// not fix; then End returns the *sink.PersistentError, which stops the
// processor, instead of retrying forever.
func TestDatabasePersistentFailureEnds(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.produce(t, "in", 5)
	a, _ := c.dbSession(t, db, "a")
	a.init(t)
	if since, _, _ := a.CommitFailing(); !since.IsZero() {
		t.Fatalf("CommitFailing since %v before any commit", since)
	}
	if _, err := db.Admin.Exec(context.Background(), "DROP TABLE processor_records"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= pgsink.MaxIdentical; i++ {
		in := a.pollN(t, 5)
		a.begin(t)
		a.writeRows(in)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := a.End(ctx, len(in), "")
		cancel()
		var pe *sink.PersistentError
		switch {
		case committed:
			t.Fatalf("End %d committed into a dropped table", i)
		case i < pgsink.MaxIdentical && err != nil:
			t.Fatalf("End %d = %v, want nil: retried until the %dth identical failure", i, err, pgsink.MaxIdentical)
		case i < pgsink.MaxIdentical:
			since, transient, why := a.CommitFailing()
			if since.IsZero() || transient || !strings.Contains(why, "processor_records") {
				t.Errorf("after End %d: CommitFailing() = %v, %v, %q; want failing, not transient, naming the table", i, since, transient, why)
			}
		case !errors.As(err, &pe) || pe.Setting != pgsink.SettingTable || !strings.Contains(pe.Line(postgresVar), "PROCESSOR_POSTGRES_TABLE"):
			t.Fatalf("End %d = %v, want a *sink.PersistentError naming PROCESSOR_POSTGRES_TABLE", i, err)
		}
	}
}
