package dbsink

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// The postgres sink end to end: instances built by app.Prepare and Build on
// kfake and on the real Apache Kafka broker, writing into the real
// PostgreSQL of PROCESSOR_TEST_POSTGRES_URL, each test in a schema of its
// own.

// Two instances share a group writing into PostgreSQL while one of them
// aborts every fifth batch on purpose, the second joins midway (a
// rebalance) and the first stops midway (another): every input that
// passes is a row exactly once, every one that fails a dead letter exactly
// once with its error, the stored offsets are the input's end offsets, and
// the group's own committed offsets are their copy.
func TestPostgresSinkExactlyOnce(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		db := pgtest.New(t)
		in := itest.Input{Topic: itest.Unique("pg-in"), N: 6000, Keys: 60}
		group := itest.Unique("pg-group")
		tg.NewTopics(t, 6, in.Topic)
		bad := func(v string) bool { _, s, _ := strings.Cut(v, ":"); seq, _ := strconv.Atoi(s); return seq%25 == 7 }
		chain := func() *transform.Chain {
			return itest.FuncChain(t, "check", func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
				if bad(string(r.Value)) {
					return out, errors.New("bad record")
				}
				return append(out, r), nil
			})
		}
		opts := func(name string) itest.InstanceOpts {
			return itest.InstanceOpts{Group: group, TxnID: group + "-" + name, Topics: []string{in.Topic}, Chain: chain(),
				OnError: pipeline.DeadLetter, MaxRecords: 500, DB: itest.OpenSink(t, db, group)}
		}
		tg.Produce(t, in, 0, in.N/2)
		ao := opts("a")
		ao.InjectAbort = func(seq uint64) bool { return seq%5 == 0 }
		a := tg.Start(t, ao)
		itest.WaitFor(t, 30*time.Second, "a to commit some batches", func() bool { return a.Pipeline.Stats().Commits >= 3 })
		b := tg.Start(t, opts("b"))
		tg.Produce(t, in, in.N/2, in.N)
		itest.WaitFor(t, 60*time.Second, "the group to store half of the input's offsets", func() bool { return itest.StoredTotal(t, db, group) >= in.N/2 })
		a.Stop(t)
		itest.WaitFor(t, 60*time.Second, "the group to store every input's offset", func() bool { return itest.StoredTotal(t, db, group) == in.N })
		b.Stop(t)

		seen := map[string]int{}
		rows, err := db.Admin.Query(context.Background(), `SELECT convert_from(value_bytes, 'UTF8') FROM processor_records`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			seen[v]++
		}
		rows.Close()
		var dups, lost, wrong, nBad int
		for i := range in.N {
			v := string(in.Record(i).Value)
			switch n := seen[v]; {
			case bad(v):
				nBad++
				if n > 0 {
					wrong++
				}
			case n == 0:
				lost++
			case n > 1:
				dups++
			}
		}
		if dups+lost+wrong > 0 || len(seen) != in.N-nBad {
			t.Errorf("rows are not exactly once: %d distinct values for %d good inputs; %d lost, %d duplicated, %d failed inputs written", len(seen), in.N-nBad, lost, dups, wrong)
		}
		if got := db.Count(t, `SELECT count(*) FROM processor_dead_letters WHERE error LIKE '%bad record%' AND stage = 'check' AND attempts = 1`); got != nBad {
			t.Errorf("%d dead letters with the error, stage and attempts, want %d", got, nBad)
		}
		if got := db.Count(t, `SELECT count(DISTINCT (src_partition, src_offset)) FROM processor_dead_letters`); got != nBad {
			t.Errorf("%d distinct dead letters, want %d", got, nBad)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := tg.Admin(t)
		ends, err := adm.ListEndOffsets(ctx, in.Topic)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			stored := db.Count(t, `SELECT next_offset FROM processor_offsets WHERE "group" = $1 AND topic = $2 AND "partition" = $3`, group, in.Topic, o.Partition)
			if int64(stored) != o.Offset {
				t.Errorf("partition %d: stored next offset %d, end offset %d", o.Partition, stored, o.Offset)
			}
			if c, _ := committed.Lookup(in.Topic, o.Partition); c.At != o.Offset {
				t.Errorf("partition %d: the group's copy of the offset is %d, want %d", o.Partition, c.At, o.Offset)
			}
		})
		if st := a.Pipeline.Status(); st.Aborts["injected"] == 0 || st.Sink != "postgres" || st.Guarantee != "exactly_once" {
			t.Errorf("a's status: aborts %v, sink %q, guarantee %q; want injected aborts, postgres, exactly_once", st.Aborts, st.Sink, st.Guarantee)
		}
		t.Logf("%d inputs: %d rows, %d dead letters; %s", in.N, len(seen), nBad, itest.FmtStats(a, b))
	})
}

// A database that refuses the password, or has no such database, is a
// configuration error: exit 2 at start with one line saying what to check,
// and never the password, rather than retrying forever.
func TestBinaryPostgresRefusedExits2(t *testing.T) {
	t.Parallel()
	base := pgtest.URL(t)
	bin := itest.Binary(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	wrongPassword, noDatabase := *u, *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "not-the-s3cret")
	noDatabase.Path = "/no_such_database"
	for want, dsn := range map[string]string{
		"password authentication failed": wrongPassword.String(),
		"does not exist":                 noDatabase.String(),
	} {
		msg := itest.RunBadConfig(t, bin, launch.Instance{Brokers: []string{"127.0.0.1:1"}, Group: "g", InputTopics: []string{"in"},
			Sink: "postgres", Settings: map[string]string{"PROCESSOR_POSTGRES_URL": dsn}, HTTPAddr: "127.0.0.1:0"}.Env()...)
		if !strings.Contains(msg, want) || strings.Contains(msg, "s3cret") {
			t.Errorf("stderr %q, want one line containing %q and no password", msg, want)
		}
	}
}

// Statement mode: the user's upsert into their own table. A row the
// database refuses (here a CHECK constraint) fails its input record alone:
// under dlq it becomes a dead letter, stage "produce", with the database's
// error, and every other input is a row of the user's table exactly once.
func TestPostgresStatementRowRefused(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	tg := itest.NewFake(t)
	in := itest.Input{Topic: itest.Unique("pgst-in"), N: 1200, Keys: 30}
	group := itest.Unique("pgst-group")
	tg.NewTopics(t, 3, in.Topic)
	tg.Produce(t, in, 0, in.N)
	if _, err := db.Admin.Exec(context.Background(),
		`CREATE TABLE invoices (id text PRIMARY KEY, amount int NOT NULL CHECK (amount >= 0), src_offset bigint)`); err != nil {
		t.Fatal(err)
	}
	refused := func(v string) bool { _, s, _ := strings.Cut(v, ":"); seq, _ := strconv.Atoi(s); return seq%10 == 3 }
	chain := itest.FuncChain(t, "invoice", func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		amount := 100
		if refused(string(r.Value)) {
			amount = -1
		}
		r.Value = []byte(`{"id":"` + string(r.Value) + `","amount":` + strconv.Itoa(amount) + `}`)
		return append(out, r), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := pgsink.Open(ctx, pgsink.Options{URL: db.URL, Group: group,
		Statement: `INSERT INTO invoices (id, amount, src_offset) VALUES (@value::jsonb->>'id', (@value::jsonb->>'amount')::int, @offset) ON CONFLICT (id) DO NOTHING`})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Chain: chain,
		OnError: pipeline.DeadLetter, MaxRecords: 300, DB: sink})
	itest.WaitFor(t, 60*time.Second, "the group to store every input's offset", func() bool { return itest.StoredTotal(t, db, group) == in.N })
	a.Stop(t)

	nRefused := 0
	for i := range in.N {
		if refused(string(in.Record(i).Value)) {
			nRefused++
		}
	}
	if got := db.Count(t, `SELECT count(*) FROM invoices`); got != in.N-nRefused {
		t.Errorf("%d invoices, want %d", got, in.N-nRefused)
	}
	if got := db.Count(t, `SELECT count(*) FROM invoices WHERE id LIKE '%:3' OR id LIKE '%:13'`); got != 0 {
		t.Errorf("%d refused inputs have invoices", got)
	}
	if got := db.Count(t, `SELECT count(DISTINCT src_offset::text || '/' || src_partition) FROM processor_dead_letters
		WHERE stage = 'produce' AND error LIKE '%check constraint%'`); got != nRefused {
		t.Errorf("%d dead letters of stage produce naming the check constraint, want %d", got, nRefused)
	}
	if got := db.Count(t, `SELECT count(*) FROM processor_dead_letters`); got != nRefused {
		t.Errorf("%d dead letters in all, want %d", got, nRefused)
	}
	t.Logf("%d inputs: %d invoices, %d refused; %s", in.N, in.N-nRefused, nRefused, itest.FmtStats(a))
}
