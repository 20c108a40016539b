package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// postgresRunSetup gives a database test its schema on the test server, a
// context bounded to two minutes, a must that fails the test on an error,
// and a kfake cluster with a client that partitions by hand.
func postgresRunSetup(t *testing.T) (db *pgtest.DB, ctx context.Context, must func(error), brokers []string, cl *kgo.Client, adm *kadm.Client) {
	t.Helper()
	db = pgtest.New(t) // the test server, and a schema of the test's own
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	must = func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	c := kafkatest.NewFake(t, kfake.NumBrokers(1))
	cl = c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	return db, ctx, must, c.Brokers, cl, kadm.NewClient(cl)
}

// TestPostgresRun plays an identity processor into PostgreSQL by hand: a
// kfake cluster holds the input (3 partitions of 8 records), the
// postgres sink's own tables (made by pgsink.Open, in a schema of the
// test's) one batch of rows with the stored offsets, committed through
// pgsink.Commit. A clean run must come out clean; a run with one input
// written twice, one never written and one row past its partition's stored
// offset must show exactly those three, each with an example naming it.
func TestPostgresRun(t *testing.T) {
	db, ctx, must, brokers, cl, adm := postgresRunSetup(t)
	base, schema := db.URL, db.Schema

	// scenario writes one run under prefix and returns eoscheck's args.
	type src struct {
		p   int32
		off int64
	}
	scenario := func(prefix string, dup, drop src, stored map[int32]int64) []string {
		in, group := prefix+"in", prefix+"group"
		table, dead, offsets := schema+"."+prefix+"records", schema+"."+prefix+"dead", schema+".offsets"
		resp, err := adm.CreateTopics(ctx, 3, -1, nil, in)
		must(err)
		must(resp.Error())
		for p := int32(0); p < 3; p++ {
			for i := range 8 {
				must(cl.ProduceSync(ctx, &kgo.Record{Topic: in, Partition: p, Value: []byte(`{"n":` + strconv.Itoa(i) + `}`)}).FirstErr())
			}
		}
		pg, err := pgsink.Open(ctx, pgsink.Options{URL: base, Table: table, DeadLetterTable: dead, OffsetsTable: offsets, Group: group})
		must(err)
		defer pg.Close()
		batch := sink.Batch{}
		for p := int32(0); p < 3; p++ {
			for o := range int64(8) {
				if (src{p, o}) != drop {
					batch.Rows = append(batch.Rows, sink.Row{Value: []byte(`{"n":1}`), Topic: in, Partition: p, Offset: o})
				}
			}
			batch.Offsets = append(batch.Offsets, sink.OffsetUpdate{TopicPartition: record.TopicPartition{Topic: in, Partition: p}, Expected: -1, Next: stored[p]})
		}
		must(pg.Commit(ctx, &batch))
		if dup != (src{-1, -1}) {
			_, err := db.Admin.Exec(ctx, "INSERT INTO "+table+" (src_topic, src_partition, src_offset, seq) VALUES ($1, $2, $3, 0)", in, dup.p, dup.off)
			must(err)
		}
		return []string{"-brokers", strings.Join(brokers, ","), "-input", in, "-group", group, "-postgres-url", base,
			"-table", table, "-dead-letter-table", dead, "-offsets-table", offsets, "-timeout", "30s"}
	}
	none := src{-1, -1}

	code, stdout, stderr := runCmd(t, scenario("good_", none, none, map[int32]int64{0: 8, 1: 8, 2: 8})...)
	if code != 0 || stderr != "" || !strings.HasSuffix(stdout, "result: CLEAN\n") {
		t.Errorf("clean run: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	for _, row := range []string{"inputs           24\n", "outputs (rows)   24 in " + schema + ".good_records\n",
		"dead letters     0 in " + schema + ".good_dead\n", "offsets stored   3 of 3 input partitions, 3 at the log end\n"} {
		if !strings.Contains(stdout, row) {
			t.Errorf("clean run: no row %q in\n%s", row, stdout)
		}
	}

	// Partition 2's stored offset is 7: its row of offset 7 lies past it.
	code, stdout, stderr = runCmd(t, scenario("bad_", src{1, 4}, src{2, 6}, map[int32]int64{0: 8, 1: 8, 2: 7})...)
	if code != 1 || stderr != "" {
		t.Errorf("bad run: exit %d, stderr %q", code, stderr)
	}
	want := []string{
		"duplicate        1      bad_in/1@4 has 2 rows (seq 0, 0), want one\n",
		"lost             1      bad_in/2@6 is below the stored next offset 7 but has no row and no dead letter (lost or skipped)\n",
		"offset-mismatch  1      row bad_in/2@7 seq 0 of " + schema + ".bad_records is at or past the stored next offset 7 of bad_in/2\n",
		"offsets stored   3 of 3 input partitions, 2 at the log end\n",
		"result: 3 ANOMALIES (duplicate 1, lost 1, offset-mismatch 1)\n",
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("bad run: no %q in\n%s", w, stdout)
		}
	}
	t.Logf("bad run:\n%s", stdout)

	// A table that is not there: one line saying so, exit 1.
	code, stdout, stderr = runCmd(t, "-brokers", strings.Join(brokers, ","), "-input", "good_in", "-group", "good_group",
		"-postgres-url", base, "-table", schema+".missing", "-timeout", "30s")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "table "+schema+".missing does not exist") {
		t.Errorf("missing table: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestPostgresUsageErrors(t *testing.T) {
	db := []string{"-input", "in", "-group", "g", "-postgres-url", "postgres://u:secret@127.0.0.1:1/db"}
	for name, args := range map[string][]string{
		"output with postgres": append([]string{"-output", "out"}, db...),
		"dlq with postgres":    append([]string{"-dlq", "d"}, db...),
		"at least once":        append([]string{"-at-least-once"}, db...),
		"watch":                append([]string{"-watch", "1m"}, db...),
		"no group":             {"-input", "in", "-postgres-url", "postgres://h/db"},
		"empty table":          append([]string{"-table", ""}, db...),
		"bad table":            append([]string{"-table", "a.b.c"}, db...),
		"same tables":          append([]string{"-table", "t", "-dead-letter-table", "t"}, db...),
		"table without url":    {"-input", "in", "-output", "out", "-group", "g", "-table", "t"},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "eoscheck: ") || strings.Contains(stderr, "secret") {
				t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
}

// TestPostgresPoisonRun audits, with -poison, a run into PostgreSQL whose
// input holds the drill's marked records, written by the postgres sink as
// a processor would: an ordinary row, a notjson input as a dead letter, a
// nearlimit input as a jsonb row and a jsonb input (an escaped NUL, which
// the sink stores in value_bytes) as a row without value. That run must
// come out clean with a line per class; the same run with the nearlimit
// row's value in value_bytes and the jsonb row's value_bytes without its
// poison member must show two misstored rows.
func TestPostgresPoisonRun(t *testing.T) {
	db, ctx, must, brokers, cl, adm := postgresRunSetup(t)

	nul := `{"key":"poison-jsonb-3","poison":"a\u0000b","seq":3}`
	values := [][2]string{ // key, value of offsets 0..3
		{"k0", `{"key":"k0","seq":0}`},
		{"poison-notjson-1", "not JSON"},
		{"poison-nearlimit-2", `{"key":"poison-nearlimit-2","pad":"xyz","seq":2}`},
		{"poison-jsonb-3", nul},
	}
	scenario := func(prefix string, bad bool) []string {
		in, group := prefix+"in", prefix+"group"
		table, dead, offsets := db.Schema+"."+prefix+"records", db.Schema+"."+prefix+"dead", db.Schema+".offsets"
		resp, err := adm.CreateTopics(ctx, 1, -1, nil, in)
		must(err)
		must(resp.Error())
		for _, kv := range values {
			must(cl.ProduceSync(ctx, &kgo.Record{Topic: in, Key: []byte(kv[0]), Value: []byte(kv[1])}).FirstErr())
		}
		pg, err := pgsink.Open(ctx, pgsink.Options{URL: db.URL, Table: table, DeadLetterTable: dead, OffsetsTable: offsets, Group: group})
		must(err)
		defer pg.Close()
		row := func(o int64, v string) sink.Row {
			return sink.Row{Key: []byte(values[o][0]), Value: []byte(v), Topic: in, Offset: o}
		}
		batch := sink.Batch{
			Rows:        []sink.Row{row(0, values[0][1]), row(2, values[2][1]), row(3, nul)},
			DeadLetters: []sink.DeadLetter{{Row: row(1, values[1][1]), Error: "transform jq: the value is not JSON", Stage: "jq"}},
			Offsets:     []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: in}, Expected: -1, Next: 4}},
		}
		if bad {
			batch.Rows = batch.Rows[:1]
		}
		must(pg.Commit(ctx, &batch))
		if bad {
			_, err := db.Admin.Exec(ctx, "INSERT INTO "+table+" (src_topic, src_partition, src_offset, seq, value_bytes) VALUES ($1, 0, 2, 0, $2), ($1, 0, 3, 0, $3)",
				in, []byte(values[2][1]), []byte(`{"poison":"something else"}`))
			must(err)
		}
		return []string{"-brokers", strings.Join(brokers, ","), "-input", in, "-group", group, "-postgres-url", db.URL,
			"-table", table, "-dead-letter-table", dead, "-offsets-table", offsets, "-timeout", "30s", "-poison"}
	}

	code, stdout, stderr := runCmd(t, scenario("good_", false)...)
	if code != 0 || stderr != "" || !strings.HasSuffix(stdout, "result: CLEAN\n") {
		t.Errorf("clean run: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	for _, w := range []string{
		"poison notjson    1 inputs: 0 rows, 1 dead letters, 0 skipped by policy\n",
		"poison nearlimit  1 inputs: 1 rows, 0 dead letters, 0 skipped by policy\n",
		"poison jsonb      1 inputs: 1 rows, 0 dead letters, 0 skipped by policy\n",
	} {
		if !strings.Contains(stdout, w) {
			t.Errorf("clean run: no %q in\n%s", w, stdout)
		}
	}

	code, stdout, stderr = runCmd(t, scenario("bad_", true)...)
	if code != 1 || stderr != "" || !strings.Contains(stdout, "result: 2 ANOMALIES (misstored 2)\n") {
		t.Errorf("bad run: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	t.Logf("bad run:\n%s", stdout)
}
