package dbsink

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/pipeline"
)

// The postgres sink never stays stuck: a statement whose cost grows with
// the batch, an outage longer than the transaction timeout, large values,
// keys that are not text. Each runs the processor as the binary builds it
// (app.Prepare and Build) against the real PostgreSQL of
// PROCESSOR_TEST_POSTGRES_URL.

// openSinkWith opens a postgres sink on db with o (URL and Group from db
// and group when unset), closed at the test's end.
func openSinkWith(t testing.TB, db *pgtest.DB, group string, o pgsink.Options) *pgsink.Sink {
	t.Helper()
	if o.URL == "" {
		o.URL = db.URL
	}
	o.Group, o.Metrics = group, pgsink.NewMetrics(prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgsink.Open(ctx, o)
	if err != nil {
		t.Fatalf("opening the postgres sink: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// A statement that costs about half a millisecond a row, a backlog whose
// first batch needs several times the 4s transaction timeout to commit:
// retried with the same batch it would never commit (the issue saw 0 of
// 40,000 rows in 155 s). The end that runs out of time shrinks the next
// batches to what commits in time, and the backlog drains at the rate the
// database allows, every input a row exactly once.
func TestPostgresSlowStatementDrains(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		db := pgtest.New(t)
		in := itest.Input{Topic: itest.Unique("pgslow-in"), N: 8000, Keys: 40}
		group := itest.Unique("pgslow-group")
		tg.NewTopics(t, 4, in.Topic)
		tg.Produce(t, in, 0, in.N)
		if _, err := db.Admin.Exec(context.Background(),
			`CREATE TABLE slow_rows (src_partition int, src_offset bigint, PRIMARY KEY (src_partition, src_offset))`); err != nil {
			t.Fatal(err)
		}
		sink := openSinkWith(t, db, group, pgsink.Options{
			Statement: `INSERT INTO slow_rows (src_partition, src_offset) SELECT @partition, @offset FROM pg_sleep(0.0005)`})
		began := time.Now()
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, DB: sink,
			MaxRecords: 100_000, CommitInterval: 2 * time.Second, TxnTimeout: 4 * time.Second, OnError: pipeline.DeadLetter})
		itest.WaitFor(t, 3*time.Minute, "the group to store every input's offset", func() bool { return itest.StoredTotal(t, db, group) == in.N })
		took := time.Since(began)
		a.Stop(t)
		if got := db.Count(t, `SELECT count(*) FROM slow_rows`); got != in.N {
			t.Errorf("%d rows, want %d (one per input)", got, in.N)
		}
		if got := db.Count(t, `SELECT count(*) FROM processor_dead_letters`); got != 0 {
			t.Errorf("%d dead letters, want none", got)
		}
		st := a.Pipeline.Status()
		if st.Aborts["end_error"] == 0 {
			t.Errorf("aborts %v: the first batch should have run out of time (end_error)", st.Aborts)
		}
		t.Logf("%d rows at ~0.5 ms each in %s (%.0f rows/s), %d commits, aborts %v", in.N, took.Round(time.Millisecond),
			float64(in.N)/took.Seconds(), st.Commits, st.Aborts)
	})
}

// The database is out of reach for longer than the transaction timeout:
// the network cut (a proxy holds every connection, so connecting hangs
// and commits fail by their deadline, saying that they ran out of time),
// or the server stopped (connections refused at once, the case where the
// old backoff, waited inside the next commit's deadline, grew to the
// deadline and left every later attempt with no time). Once it is back
// the next attempt has its whole deadline, so the processor commits again
// at once and writes the rest exactly once.
func TestPostgresOutageResumes(t *testing.T) {
	t.Parallel()
	t.Run("network cut", func(t *testing.T) {
		t.Parallel()
		db := pgtest.New(t)
		var proxy *pgtest.Proxy
		outage(t, db, func(u string) string { proxy = pgtest.NewProxy(t, u); return proxy.URL(u) },
			func() { proxy.Cut() }, func() { proxy.Heal() }, "ran out of time")
	})
	t.Run("server stopped", func(t *testing.T) {
		t.Parallel()
		srv := pgtest.StartServer(t)
		db := pgtest.NewAt(t, srv.URL)
		outage(t, db, func(u string) string { return u },
			func() { srv.Must("stop", "fast") }, func() { srv.Must("start") }, "")
	})
}

// outage runs TestPostgresOutageResumes on db, through the URL route
// makes of db's, with an outage from begin to end; a failure during it
// must say said, when set.
func outage(t *testing.T, db *pgtest.DB, route func(string) string, begin, end func(), said string) {
	tg := itest.NewFake(t)
	in := itest.Input{Topic: itest.Unique("pgout-in"), N: 1000, Keys: 20}
	group := itest.Unique("pgout-group")
	tg.NewTopics(t, 2, in.Topic)
	itest.OpenSink(t, db, group) // the tables
	sink := openSinkWith(t, db, group, pgsink.Options{URL: route(db.URL)})
	a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, DB: sink, TxnTimeout: 4 * time.Second})
	tg.Produce(t, in, 0, in.N/2)
	itest.WaitFor(t, time.Minute, "half of the input stored", func() bool { return itest.StoredTotal(t, db, group) == in.N/2 })
	begin()
	tg.Produce(t, in, in.N/2, in.N)
	var saw string
	until := time.Now().Add(12 * time.Second) // past the old backoff's 5s cap, above the 4s deadline
	for time.Now().Before(until) {
		if e := a.Pipeline.Status().LastError; e != nil && strings.Contains(e.Message, said) {
			saw = e.Message
		}
		time.Sleep(100 * time.Millisecond)
	}
	if said != "" && (saw == "" || strings.Contains(saw, "cannot connect")) {
		t.Errorf("no failure during the outage said %q (last: %+v)", said, a.Pipeline.Status().LastError)
	}
	back := time.Now()
	end()
	itest.WaitFor(t, 30*time.Second, "the rest stored after the outage", func() bool { return itest.StoredTotal(t, db, group) == in.N })
	a.Stop(t)
	if got := db.Count(t, `SELECT count(DISTINCT (src_partition, src_offset)) FROM processor_records`); got != in.N || db.Count(t, `SELECT count(*) FROM processor_records`) != in.N {
		t.Errorf("%d distinct rows, want %d exactly once", got, in.N)
	}
	t.Logf("committing again %s after the outage; during it: %s", time.Since(back).Round(time.Millisecond), saw)
}

// Values of 0.9 MB (near the broker's record limit) in a backlog: PROCESSOR_MAX_TXN_BYTES bounds each
// batch (and so the sink's memory) in bytes, not only in records; keys
// that are not text (bytes that are not UTF-8, NUL bytes) reach the
// statement's @key exactly; @key_text of a key with a NUL, which text
// cannot hold, is a row the database refuses: a dead letter, the rest
// committed.
func TestPostgresLargeValuesAndBinaryKeys(t *testing.T) {
	t.Parallel()
	tg := itest.NewFake(t)
	db := pgtest.New(t)
	topic, group := itest.Unique("pgbig-in"), itest.Unique("pgbig-group")
	tg.NewTopics(t, 1, topic)
	if _, err := db.Admin.Exec(context.Background(), `CREATE TABLE big (k bytea, kt text, n int, size int)`); err != nil {
		t.Fatal(err)
	}
	const bigValues, maxTxnBytes = 24, 4 << 20
	var recs []*kgo.Record
	keys := [][]byte{{0xff, 0xfe, 0x00, 0x01}, {0, 0, 0, 0, 0, 0, 0, 42}, []byte("plain")}
	for i := range bigValues {
		v := fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 900_000))
		recs = append(recs, &kgo.Record{Topic: topic, Key: keys[i%len(keys)], Value: []byte(v)})
	}
	cl, err := kgo.NewClient(tg.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	run := func(group, statement string) *itest.Instance {
		sink := openSinkWith(t, db, group, pgsink.Options{Statement: statement})
		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{topic}, DB: sink,
			MaxTxnBytes: maxTxnBytes, OnError: pipeline.DeadLetter})
		itest.WaitFor(t, time.Minute, "every input stored", func() bool { return itest.StoredTotal(t, db, group) == bigValues })
		a.Stop(t)
		return a
	}
	// The key as bytea: every key exactly as it arrived.
	a := run(group, `INSERT INTO big (k, n, size) VALUES (@key, (@value::jsonb->>'n')::int, length(@value_text))`)
	if got := db.Count(t, `SELECT count(DISTINCT n) FROM big WHERE size > 900000`); got != bigValues {
		t.Errorf("%d distinct large rows, want %d", got, bigValues)
	}
	for i, k := range keys {
		if got := db.Count(t, `SELECT count(*) FROM big WHERE k = $1`, k); got != bigValues/len(keys) {
			t.Errorf("key %d (%q): %d rows with the exact bytes, want %d", i, k, got, bigValues/len(keys))
		}
	}
	// Each transaction held at most MAX_TXN_BYTES of outputs, with room
	// for the one record that crosses it: at least bigValues/5 commits.
	if st := a.Pipeline.Status(); st.Commits < bigValues/5 {
		t.Errorf("%d commits for %d values of 0.9 MB under a 4 MiB transaction bound", st.Commits, bigValues)
	}
	// The key as text: PostgreSQL's text holds neither a NUL nor bytes
	// that are not UTF-8, so the rows of those keys are refused, each a
	// dead letter in the same transaction, and the others written.
	run(group+"-text", `INSERT INTO big (kt, n, size) VALUES (@key_text, (@value::jsonb->>'n')::int, length(@value_text))`)
	if got := db.Count(t, `SELECT count(*) FROM big WHERE kt = 'plain'`); got != bigValues/len(keys) {
		t.Errorf("%d rows with @key_text 'plain', want %d", got, bigValues/len(keys))
	}
	if got := db.Count(t, `SELECT count(*) FROM big WHERE kt IS NOT NULL AND kt <> 'plain'`); got != 0 {
		t.Errorf("%d rows with another @key_text, want none", got)
	}
	if got := db.Count(t, `SELECT count(DISTINCT src_offset) FROM processor_dead_letters WHERE stage = 'produce' AND position('\x00'::bytea in key) > 0`); got != 2*bigValues/len(keys) {
		t.Errorf("%d dead letters of binary keys, want %d", got, 2*bigValues/len(keys))
	}
}

// An instance frozen (SIGSTOP) in the middle of its database transaction
// holds the row locks of its partitions' offsets. Frozen between two
// statements (statement mode sends its rows in one round trip and waits),
// the server ends that transaction after
// idle_in_transaction_session_timeout (10 s by default); frozen while its
// rows stream in (a COPY in the default table mode, slowed by a trigger),
// the server waits for the rest, and the partitions' new owner ends the
// stopped session itself once its transaction is older than any commit
// may run. Either way the new owner writes the partitions while the zombie
// still sleeps, instead of waiting for it to wake; woken, the zombie is
// fenced: every input is a row exactly once. Two processor binaries on
// kfake, rows of a few milliseconds each, so that the instances spend most
// of their time inside a transaction.
func TestPostgresFrozenInstanceReleasesLocks(t *testing.T) {
	t.Parallel()
	modes := []frozenMode{
		{name: "statement", statement: `INSERT INTO frozen_rows (src_partition, src_offset) SELECT @partition, @offset FROM pg_sleep(0.002)`,
			table: "frozen_rows", n: 6000, rowSleep: "0", while: "%"},
		// Values of 256 KiB: a COPY's rows outgrow the sockets' buffers,
		// so the instance is frozen while it sends them, and the server
		// is left waiting for the rest of the COPY.
		{name: "copy", table: "processor_records", n: 300, valueSize: 256 << 10, rowSleep: "0.05", while: "copy %"},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			frozenInstance(t, m)
		})
	}
}

// frozenMode is one case of TestPostgresFrozenInstanceReleasesLocks: the
// statement (the default table when empty) and the table it writes, the
// inputs (valueSize: JSON values of about that size, else the harness's
// small ones), how long each row inserted into processor_records takes
// (a trigger), and the query (LIKE) the frozen instance must be running.
type frozenMode struct {
	name, statement, table string
	n, valueSize           int
	rowSleep, while        string
}

// frozenInstance runs TestPostgresFrozenInstanceReleasesLocks in mode m.
func frozenInstance(t *testing.T, m frozenMode) {
	tg := itest.NewFake(t)
	db := pgtest.New(t)
	in := itest.Input{Topic: itest.Unique("pgfreeze-in"), N: m.n, Keys: 30}
	group := itest.Unique("pgfreeze-group")
	tg.NewTopics(t, 2, in.Topic)
	itest.OpenSink(t, db, group) // the tables
	for _, q := range []string{
		`CREATE TABLE frozen_rows (src_partition int, src_offset bigint, PRIMARY KEY (src_partition, src_offset))`,
		`CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(` + m.rowSleep + `); RETURN NEW; END $$`,
		`CREATE TRIGGER slow BEFORE INSERT ON processor_records FOR EACH ROW EXECUTE FUNCTION slow()`,
	} {
		if _, err := db.Admin.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if m.valueSize == 0 {
		tg.Produce(t, in, 0, in.N)
	} else {
		produceLarge(t, tg, in, m.valueSize)
	}
	start := func(name string) *itest.Proc {
		return tg.StartBinary(t, group, group+"-"+name, in.Topic, "", func(inst *launch.Instance) {
			inst.Sink, inst.OutputTopic = "postgres", ""
			inst.SessionTimeout, inst.TransactionTimeout = 6*time.Second, 4*time.Second
			inst.Settings = map[string]string{"PROCESSOR_POSTGRES_URL": pgtest.WithParam(t, db.URL, "application_name", group+"-"+name)}
			if m.statement != "" {
				inst.Settings["PROCESSOR_POSTGRES_STATEMENT"] = m.statement
			}
		})
	}
	a, b := start("a"), start("b")
	inTxn := func(name, query string) bool {
		return db.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL
			AND state <> 'idle' AND lower(query) LIKE $2`, group+"-"+name, query) > 0
	}
	itest.WaitFor(t, time.Minute, "both instances to write", func() bool { return inTxn("a", "%") && inTxn("b", "%") })
	frozen := false
	for try := 0; !frozen && try < 500; try++ {
		if inTxn("a", m.while) {
			_ = a.Process.Signal(syscall.SIGSTOP)
			if frozen = inTxn("a", m.while); !frozen {
				_ = a.Process.Signal(syscall.SIGCONT)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !frozen {
		t.Fatalf("could not freeze instance a inside its database transaction, running a query like %q", m.while)
	}
	frozenAt := time.Now()
	itest.WaitFor(t, 90*time.Second, "b to store every input while a is frozen", func() bool { return itest.StoredTotal(t, db, group) == in.N })
	took := time.Since(frozenAt)
	_ = a.Process.Signal(syscall.SIGCONT)
	time.Sleep(5 * time.Second) // a wakes up, finds its transaction ended, and is fenced
	a.Terminate(t)
	b.Terminate(t)
	if got := db.Count(t, `SELECT count(DISTINCT (src_partition, src_offset)) FROM `+m.table); got != in.N || db.Count(t, `SELECT count(*) FROM `+m.table) != in.N {
		t.Errorf("%d distinct rows, want %d, each once", got, in.N)
	}
	if got := db.Count(t, `SELECT count(*) FROM processor_dead_letters`); got != 0 {
		t.Errorf("%d dead letters (a row written twice would be one): want none", got)
	}
	t.Logf("every input stored %s after a froze inside its transaction", took.Round(time.Millisecond))
}

// ProduceLarge writes in's records with JSON values of about size bytes.
func produceLarge(t *testing.T, tg *itest.Target, in itest.Input, size int) {
	t.Helper()
	cl, err := kgo.NewClient(tg.ClientOpts(kgo.ProducerBatchMaxBytes(2 << 20))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pad := strings.Repeat("x", size)
	for i := range in.N {
		r := in.Record(i)
		r.Value = []byte(fmt.Sprintf(`{"v":%q,"pad":"%s"}`, r.Value, pad))
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// A server certificate that does not verify at start (here: signed by a
// CA other than the URL's sslrootcert) is a configuration error: the
// binary exits 2 with one line naming PROCESSOR_POSTGRES_URL, sslmode,
// sslrootcert and the server, as for a wrong password, instead of
// retrying as if the server were down.
func TestBinaryPostgresCertificateExits2(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartServer(t)
	bin := itest.Binary(t)
	ca, other := pgtest.NewCA(t, "the database's CA"), pgtest.NewCA(t, "another CA")
	cert, key := ca.ServerCert(t, time.Now().Add(time.Hour), "127.0.0.1")
	srv.UseCertificate(t, cert, key)
	u := pgtest.WithParam(t, pgtest.WithParam(t, srv.URL, "sslmode", "verify-full"), "sslrootcert", other.File)
	msg := itest.RunBadConfig(t, bin, launch.Instance{Brokers: []string{"127.0.0.1:1"}, Group: "g", InputTopics: []string{"in"},
		Sink: "postgres", Settings: map[string]string{"PROCESSOR_POSTGRES_URL": u}, HTTPAddr: "127.0.0.1:0"}.Env()...)
	for _, want := range []string{"PROCESSOR_POSTGRES_URL", "sslmode", "sslrootcert", "127.0.0.1", "authority"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q lacks %q", msg, want)
		}
	}
}
