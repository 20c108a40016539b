package pgsink

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// What PostgreSQL refuses where Go's JSON parser does not, and errors the
// sink has no rule for: no batch may be retried forever for them.

// storedValues returns, per source offset of partition 0 of "in", the
// value column as text ("NULL" when null) and value_bytes.
func storedValues(t *testing.T, d *testDB, table string) map[int64][2]string {
	t.Helper()
	rs, err := d.Admin.Query(testCtx(t), `SELECT src_offset, coalesce(value::text, 'NULL'), coalesce(value_bytes, '') FROM `+table+` ORDER BY src_offset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[int64][2]string{}
	for rs.Next() {
		var off int64
		var v string
		var vb []byte
		if err := rs.Scan(&off, &v, &vb); err != nil {
			t.Fatal(err)
		}
		out[off] = [2]string{v, string(vb)}
	}
	if rs.Err() != nil {
		t.Fatal(rs.Err())
	}
	return out
}

// valueRows are rows of "in"/0 from offset 0 on, one per value.
func valueRows(values ...string) []sink.Row {
	out := make([]sink.Row, len(values))
	for i, v := range values {
		out[i] = sink.Row{Value: []byte(v), Topic: "in", Partition: 0, Offset: int64(i)}
	}
	return out
}

// anyJSON, as a want of checkValues, takes any value stored as JSON.
const anyJSON = "\x00any JSON"

// checkValues commits values in one batch and checks that each is stored
// as JSON (in value, as jsonb prints it; anyJSON: in any form) or, where
// want is "", in value_bytes as it came.
func checkValues(t *testing.T, d *testDB, s *Sink, values []string, want []string) {
	t.Helper()
	err := s.Commit(testCtx(t), &sink.Batch{Rows: valueRows(values...), Offsets: []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 0}, Expected: -1, Next: int64(len(values))}}})
	if err != nil {
		t.Fatalf("Commit = %v, want every row written, in value_bytes where jsonb refuses the value", err)
	}
	got := storedValues(t, d, DefaultTable)
	if len(got) != len(values) {
		t.Fatalf("%d rows stored, want %d", len(got), len(values))
	}
	for i, v := range values {
		g := got[int64(i)]
		switch {
		case want[i] == anyJSON:
			if g[0] == "NULL" || g[1] != "" {
				t.Errorf("row %d %.40q: value_bytes %.40q, want it stored as JSON", i, v, g[1])
			}
		case want[i] == "" && (g[0] != "NULL" || g[1] != v):
			t.Errorf("row %d %.40q: value %.40q, value_bytes %.40q; want it in value_bytes", i, v, g[0], g[1])
		case want[i] != "" && (g[0] != want[i] || g[1] != ""):
			t.Errorf("row %d %.40q: value %.40q, value_bytes %.40q; want value %.40q", i, v, g[0], g[1], want[i])
		}
	}
}

// Values that Go's encoding/json accepts and jsonb refuses go to
// value_bytes, in one Commit, with the rows around them as JSON: half an
// emoji as JavaScript escapes it, numbers numeric cannot hold.
func TestCommitJSONBRefusedValues(t *testing.T) {
	d := newTestDB(t)
	s := d.open(t, Options{})
	values := []string{
		`{"ok":1}`,
		`{"s":"\ud83d"}`,  // a lone high surrogate
		`["\ude00"]`,      // a lone low surrogate
		`"\ud83d\u0041"`,  // a high surrogate and no low one
		`"\ud83d\ude00"`,  // a whole emoji: fine
		`{"n":1e131072}`,  // overflows numeric
		`1e131071`,        // does not
		`[1e-16384]`,      // too many digits after the point
		`0.5e-16382`,      // 16383 of them: fine
		`{"a":"\u0000"}`,  // NUL
		`{"a":"\\u0000"}`, // an escaped backslash: fine
		`{"deep":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}`, // fine at the default max_stack_depth
	}
	want := []string{`{"ok": 1}`, "", "", "", `"😀"`, "", "1e131071", "", "", "", `{"a": "\\u0000"}`, ""}
	want[6] = "1" + strings.Repeat("0", 131071)
	want[8] = "0." + strings.Repeat("0", 16382) + "5"
	want[11] = anyJSON
	checkValues(t, d, s, values, want)
}

// PostgreSQL has the final word: values the Go check lets through and
// jsonb refuses (here nesting deeper than a small max_stack_depth allows)
// go again in value_bytes, every one of them, in the same transaction.
func TestCommitJSONBRefusalFallsBack(t *testing.T) {
	d := newTestDB(t)
	m := NewMetrics(prometheus.NewRegistry())
	s := d.open(t, Options{URL: pgtest.WithParam(t, d.URL, "max_stack_depth", "100kB"), Metrics: m})
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000) // json.Valid takes up to 10000
	values := []string{`{"a":1}`, deep, `{"b":2}`, `{"c":3}`, deep, deep, `{"d":4}`, deep}
	checkValues(t, d, s, values, []string{`{"a": 1}`, "", `{"b": 2}`, `{"c": 3}`, "", "", `{"d": 4}`, ""})
	if got := testutil.ToFloat64(m.Commits); got != 1 {
		t.Errorf("commits = %v, want 1", got)
	}
	if n := d.Count(t, `SELECT next_offset FROM processor_offsets`); n != len(values) {
		t.Errorf("stored next offset %d, want %d", n, len(values))
	}
}

// In a database whose encoding is not UTF8, a character it lacks, raw or
// as a \u escape, is refused by jsonb: that value goes to value_bytes.
func TestCommitJSONBRefusedInLatin1(t *testing.T) {
	d := &testDB{pgtest.NewDatabase(t, "LATIN1")}
	s := d.open(t, Options{})
	values := []string{`{"s":"é"}`, `{"s":"中"}`, `{"s":"\u4e2d"}`, `{"s":"\u00e9"}`, `{"s":"ok"}`}
	checkValues(t, d, s, values, []string{`{"s": "é"}`, "", "", `{"s": "é"}`, `{"s": "ok"}`})
}

// Statement mode: a row refused for its content with an SQLSTATE of a
// class beyond constraints and bad values (21000: an upsert touching one
// row twice; 54000: an index entry too large) is a *sink.RowError at once,
// carrying the SQLSTATE and PostgreSQL's message.
func TestStatementRowContentClasses(t *testing.T) {
	d := newTestDB(t)
	d.exec(t, `CREATE TABLE items (id int PRIMARY KEY, name text)`)
	d.exec(t, `CREATE UNIQUE INDEX ON items (name)`)
	s := d.open(t, Options{Statement: `INSERT INTO items (id, name)
		SELECT (e->>'id')::int, e->>'name' FROM jsonb_array_elements(@value::jsonb) e
		ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name`})
	ctx := testCtx(t)
	random := make([]byte, 12000)
	_, _ = rand.Read(random)
	big := base64.StdEncoding.EncodeToString(random) // incompressible: too large for a btree entry
	for _, tc := range []struct{ name, value, code string }{
		{"one row twice", `[{"id":1,"name":"a"},{"id":1,"name":"b"}]`, "21000"},
		{"index entry too large", `[{"id":2,"name":"` + big + `"}]`, "54000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := valueRows(`[{"id":10,"name":"x"}]`, tc.value, `[{"id":11,"name":"y"}]`)
			err := s.Commit(ctx, &sink.Batch{Rows: rows, Offsets: []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 0}, Expected: -1, Next: 3}}})
			var re *sink.RowError
			if !errors.As(err, &re) || re.Index != 1 || !strings.Contains(err.Error(), tc.code) || Retriable(err) {
				t.Fatalf("Commit = %v, want a *sink.RowError for row 1 with SQLSTATE %s", err, tc.code)
			}
		})
	}
}

// An SQLSTATE no rule knows, on the same row, MaxIdentical times in a row:
// retried until then, and then that row's *sink.RowError, which names the
// SQLSTATE and the message.
func TestStatementUnknownErrorBlamesRowAfterRepeats(t *testing.T) {
	d := newTestDB(t)
	d.exec(t, `CREATE TABLE t (v jsonb)`)
	d.exec(t, `CREATE FUNCTION check_v(v jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
		BEGIN
			IF v ? 'odd' THEN RAISE EXCEPTION 'odd value' USING ERRCODE = '55000'; END IF;
			RETURN v;
		END $$`)
	s := d.open(t, Options{Statement: `INSERT INTO t VALUES (check_v(@value::jsonb))`})
	ctx := testCtx(t)
	batch := func() *sink.Batch {
		return &sink.Batch{Rows: valueRows(`{"a":1}`, `{"odd":1}`), Offsets: []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 0}, Expected: -1, Next: 2}}}
	}
	for i := 1; i < MaxIdentical; i++ {
		err := s.Commit(ctx, batch())
		var re *sink.RowError
		var pe *sink.PersistentError
		if err == nil || errors.As(err, &re) || errors.As(err, &pe) || Retriable(err) {
			t.Fatalf("Commit %d = %v, want a plain error to retry, not yet the row's", i, err)
		}
	}
	err := s.Commit(ctx, batch())
	var re *sink.RowError
	if !errors.As(err, &re) || re.Index != 1 || !strings.Contains(err.Error(), "55000") || !strings.Contains(err.Error(), "odd value") {
		t.Fatalf("Commit %d = %v, want a *sink.RowError for row 1 naming SQLSTATE 55000 and the message", MaxIdentical, err)
	}
	// The count starts again after a row was blamed.
	if err := s.Commit(ctx, batch()); errors.As(err, &re) {
		t.Errorf("the next Commit = %v, want the count to start again", err)
	}
}

// Failures no row causes and no retry fixes end, after MaxIdentical
// identical ones, in a *sink.PersistentError whose one line names the setting
// to check.
func TestCommitPersistentErrors(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name    string
		opts    Options
		setup   func(t *testing.T, d *testDB)
		setting string
	}{
		{"statement table dropped", Options{Statement: `INSERT INTO t VALUES (@value::jsonb)`},
			func(t *testing.T, d *testDB) { d.exec(t, "DROP TABLE t") }, SettingStatement},
		{"records table dropped", Options{},
			func(t *testing.T, d *testDB) { d.exec(t, "DROP TABLE processor_records") }, SettingTable},
		{"offsets trigger with an unknown SQLSTATE", Options{},
			func(t *testing.T, d *testDB) {
				d.exec(t, `CREATE FUNCTION no_offsets() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN RAISE EXCEPTION 'offsets are frozen' USING ERRCODE = '55000'; END $$`)
				d.exec(t, `CREATE TRIGGER frozen BEFORE INSERT OR UPDATE ON processor_offsets FOR EACH ROW EXECUTE FUNCTION no_offsets()`)
			}, ""},
		{"privilege revoked", Options{}, nil, SettingURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDB(t)
			d.exec(t, `CREATE TABLE t (v jsonb)`)
			o := tc.opts
			if tc.setup == nil { // a user of its own that loses INSERT on the table
				d.open(t, Options{})
				var role string
				role, o.URL = d.writer(t)
				tc.setup = func(t *testing.T, d *testDB) { d.exec(t, "REVOKE INSERT ON processor_records FROM "+role) }
			}
			s := d.open(t, o)
			tc.setup(t, d)
			for i := 1; i <= MaxIdentical; i++ {
				err := s.Commit(ctx, &sink.Batch{Rows: valueRows(`{"a":1}`), Offsets: []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 0}, Expected: -1, Next: 1}}})
				var pe *sink.PersistentError
				var re *sink.RowError
				switch {
				case err == nil || errors.As(err, &re) || Retriable(err):
					t.Fatalf("Commit %d = %v, want an error that is neither a row's nor transient", i, err)
				case i < MaxIdentical && errors.As(err, &pe):
					t.Fatalf("Commit %d = %v, want it retried until the %dth", i, err, MaxIdentical)
				case i == MaxIdentical:
					want := "PROCESSOR_POSTGRES_" + tc.setting
					if tc.setting == "" {
						want = "check the sink's table processor_offsets"
					}
					line := ""
					if errors.As(err, &pe) {
						line = pe.Line(func(s string) string { return "PROCESSOR_POSTGRES_" + s })
					}
					if !errors.As(err, &pe) || pe.Setting != tc.setting || !strings.Contains(line, want) ||
						!strings.Contains(err.Error(), "SQLSTATE") || strings.Contains(err.Error(), "\n") {
						t.Fatalf("Commit %d = %v, want a one-line *sink.PersistentError saying %q", i, err, want)
					}
					t.Logf("%s", err)
				}
			}
		})
	}
}
