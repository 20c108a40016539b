package pgsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
)

func TestOpenCreatesTables(t *testing.T) {
	d := newTestDB(t)
	d.open(t, Options{})
	for _, table := range []string{DefaultTable, DefaultDeadLetterTable, DefaultOffsetsTable} {
		if n := d.Count(t, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2", d.Schema, table); n != 1 {
			t.Errorf("table %s.%s: %d, want 1", d.Schema, table, n)
		}
	}
	// Opening again finds them and is fine; statement mode creates no
	// records table.
	d.open(t, Options{})
	other := pgtest.Name(t, "o")
	d.exec(t, "CREATE SCHEMA "+other)
	t.Cleanup(func() { d.exec(t, "DROP SCHEMA "+other+" CASCADE") })
	d.exec(t, "CREATE TABLE "+other+".target (x int)")
	d.open(t, Options{
		Statement:       "INSERT INTO " + other + ".target VALUES (@partition)",
		DeadLetterTable: other + ".dead", OffsetsTable: other + ".offs", Table: other + ".unused",
	})
	for table, want := range map[string]int{"dead": 1, "offs": 1, "unused": 0} {
		if n := d.Count(t, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2", other, table); n != want {
			t.Errorf("table %s.%s: %d, want %d", other, table, n, want)
		}
	}
}

func TestOpenConfigErrors(t *testing.T) {
	d := newTestDB(t)
	ctx := testCtx(t)
	d.exec(t, "CREATE TABLE wrong_columns (a int)")
	d.exec(t, "CREATE TABLE invoices (order_id int PRIMARY KEY)")
	for _, tc := range []struct {
		o       Options
		setting string
		want    string
	}{
		{Options{Table: "no_such_schema.records"}, SettingTable, "schema"},
		{Options{DeadLetterTable: "wrong_columns"}, SettingDeadLetterTable, "src_topic"},
		{Options{Table: "wrong_columns"}, SettingTable, "src_topic"},
		{Options{Statement: "INSERT INTO no_such_table VALUES (@key)"}, SettingStatement, "no_such_table"},
		{Options{Statement: "INSERT INTO invoices (order_id) VALUES (@key_text)"}, SettingStatement, "integer"},
		{Options{Statement: "INSERT INTO invoices (order_id) VALUES (1); DELETE FROM invoices"}, SettingStatement, "multiple commands"},
		{Options{Statement: "INSERT INTO invoices (order_id) VALUES (@bogus)"}, SettingStatement, "@bogus"},
	} {
		tc.o.URL, tc.o.Group = d.URL, "g"
		_, err := Open(ctx, tc.o)
		var ce *settings.Error
		if !errors.As(err, &ce) || ce.Field != tc.setting || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v) = %v, want a %s *settings.Error mentioning %q", tc.o, err, tc.setting, tc.want)
		}
		t.Logf("%v", err)
	}
}

func TestOpenConnectErrors(t *testing.T) {
	base := pgtest.URL(t)
	ctx := testCtx(t)
	// A wrong password: a *sink.RefusedError that says where and what to
	// check, without the password.
	_, err := Open(ctx, Options{URL: base, Password: "not-the-password-42", Group: "g"})
	var ce *settings.Error
	var refused *sink.RefusedError
	if err == nil || errors.As(err, &ce) || !errors.As(err, &refused) || Retriable(err) {
		t.Fatalf("wrong password: %v (Retriable %v), want a non-retriable *sink.RefusedError", err, Retriable(err))
	}
	for _, want := range []string{"cannot connect to PostgreSQL at", "password"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("wrong password: %q does not say %q", err, want)
		}
	}
	t.Logf("wrong password: %v", err)
	if strings.Contains(err.Error(), "not-the-password-42") {
		t.Errorf("the error shows the password: %v", err)
	}
	// Options.Password replaces a wrong one in the URL.
	d := newTestDB(t)
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	if pw, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "wrong-"+pw)
		s, err := Open(ctx, Options{URL: u.String(), Password: pw, Group: "g"})
		if err != nil {
			t.Fatalf("Options.Password did not replace the URL's: %v", err)
		}
		s.Close()
	} else {
		t.Logf("%s holds no password: Options.Password replacing the URL's is not checked", pgtest.URLVar)
	}
	// Nobody listening: retriable, names host:port/database.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = Open(ctx, Options{URL: "postgres://processor:secret@" + addr + "/somedb?sslmode=disable", Group: "g"})
	if err == nil || !Retriable(err) || !strings.Contains(err.Error(), addr+"/somedb") || strings.Contains(err.Error(), "secret") {
		t.Errorf("unreachable server: %v (Retriable %v), want a retriable error naming %s/somedb without the password", err, Retriable(err), addr)
	}
	t.Logf("unreachable server: %v", err)
}

func TestCommitDefaultTable(t *testing.T) {
	d := newTestDB(t)
	m := NewMetrics(prometheus.NewRegistry())
	s := d.open(t, Options{Metrics: m})
	ctx := testCtx(t)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	b := &sink.Batch{
		Rows: []sink.Row{
			{Key: []byte("k0"), Value: []byte(`{"order":1,"items":[1,2]}`), Timestamp: ts, Topic: "in", Partition: 0, Offset: 5,
				Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "bin", Value: []byte{0xff, 0}}, {Key: `<"&">`, Value: []byte("\b\f\u2028\\<&>\x01")}}},
			{Key: nil, Value: []byte("not json"), Topic: "in", Partition: 0, Offset: 5, Seq: 1},
			{Key: []byte{1, 2}, Value: nil, Topic: "in", Partition: 0, Offset: 6},
			{Value: []byte(`{"s":"\u0000"}`), Topic: "in", Partition: 0, Offset: 7}, // valid JSON, refused by jsonb
			{Value: []byte("\"\xff\""), Topic: "in", Partition: 0, Offset: 8},       // not UTF-8
			{Value: []byte(`42`), Topic: "in", Partition: 0, Offset: 9},
		},
		Offsets: []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 0}, Expected: -1, Next: 10}},
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		off, seq             int64
		key, valueBytes      []byte
		value, headers       *string
		ts                   *time.Time
		hasWritten, jsonType bool
	}
	q := `SELECT src_offset, seq, key, value::text, value_bytes, headers::text, ts, written_at IS NOT NULL
		FROM processor_records WHERE src_topic = 'in' AND src_partition = 0 ORDER BY src_offset, seq`
	rs, err := d.Admin.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []rec
	for rs.Next() {
		var r rec
		if err := rs.Scan(&r.off, &r.seq, &r.key, &r.value, &r.valueBytes, &r.headers, &r.ts, &r.hasWritten); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if rs.Err() != nil {
		t.Fatal(rs.Err())
	}
	if len(got) != len(b.Rows) {
		t.Fatalf("%d rows, want %d", len(got), len(b.Rows))
	}
	str := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	// JSON goes to value (jsonb), the rest to value_bytes; nil to neither.
	for i, want := range []struct{ value, valueBytes string }{
		{`{"items": [1, 2], "order": 1}`, ""},
		{"NULL", "not json"},
		{"NULL", ""},
		{"NULL", `{"s":"\u0000"}`},
		{"NULL", "\"\xff\""},
		{"42", ""},
	} {
		if str(got[i].value) != want.value || string(got[i].valueBytes) != want.valueBytes {
			t.Errorf("row %d: value %s, value_bytes %q; want %s, %q", i, str(got[i].value), got[i].valueBytes, want.value, want.valueBytes)
		}
	}
	if got[2].valueBytes != nil || got[2].value != nil {
		t.Errorf("a nil value: value %v, value_bytes %v; want both NULL", got[2].value, got[2].valueBytes)
	}
	if string(got[0].key) != "k0" || got[1].key != nil || string(got[2].key) != "\x01\x02" {
		t.Errorf("keys %q %q %q", got[0].key, got[1].key, got[2].key)
	}
	if got[1].seq != 1 || got[0].seq != 0 {
		t.Errorf("seq %d %d, want 0 1", got[0].seq, got[1].seq)
	}
	if got[0].ts == nil || !got[0].ts.Equal(ts) || got[1].ts != nil {
		t.Errorf("ts %v %v, want %v and NULL", got[0].ts, got[1].ts, ts)
	}
	var hs []map[string]any
	if err := json.Unmarshal([]byte(str(got[0].headers)), &hs); err != nil {
		t.Fatalf("headers %s: %v", str(got[0].headers), err)
	}
	if fmt.Sprint(hs) != "[map[key:trace value:abc] map[key:bin value_base64:/wA=] map[key:<\"&\"> value:\b\f\u2028\\<&>\x01]]" {
		t.Errorf("headers = %q", hs)
	}
	// The escapes are jsonb's to read: the text comes back as it was.
	if n := d.Count(t, `SELECT count(*) FROM processor_records WHERE headers->2->>'key' = '<"&">' AND headers->2->>'value' = E'\b\f\u2028\\<&>\x01'`); n != 1 {
		t.Errorf("the third header's key and value read back as text: %d rows, want 1", n)
	}
	if str(got[1].headers) != "[]" || !got[0].hasWritten {
		t.Errorf("headers of a record without: %s; written_at set: %v", str(got[1].headers), got[0].hasWritten)
	}
	// The JSON is queryable as such.
	if n := d.Count(t, `SELECT count(*) FROM processor_records WHERE value->>'order' = '1'`); n != 1 {
		t.Errorf("value->>'order' = '1': %d rows, want 1", n)
	}
	if testutil.ToFloat64(m.Commits) != 1 || testutil.ToFloat64(m.RowsWritten) != 6 || roundTrips(t, m) != 1 {
		t.Errorf("metrics: commits %v, rows %v, round trips %d; want 1, 6, 1", testutil.ToFloat64(m.Commits), testutil.ToFloat64(m.RowsWritten), roundTrips(t, m))
	}
}

func TestOffsets(t *testing.T) {
	d := newTestDB(t)
	s := d.open(t, Options{})
	ctx := testCtx(t)
	p0, p1, q0 := record.TopicPartition{Topic: "a", Partition: 0}, record.TopicPartition{Topic: "a", Partition: 1}, record.TopicPartition{Topic: "b", Partition: 0}
	got, err := s.Offsets(ctx, []record.TopicPartition{p0, p1})
	if err != nil || len(got) != 0 {
		t.Fatalf("Offsets before any commit = %v, %v; want empty", got, err)
	}
	// First commit of a partition: an INSERT.
	if err := s.Commit(ctx, &sink.Batch{Rows: rows("a", 0, 0, 3), Offsets: []sink.OffsetUpdate{{TopicPartition: p0, Expected: -1, Next: 3}, {TopicPartition: q0, Expected: -1, Next: 100}}}); err != nil {
		t.Fatal(err)
	}
	// Then conditional UPDATEs; offsets may move without rows (all filtered).
	if err := s.Commit(ctx, &sink.Batch{Rows: rows("a", 0, 3, 2), Offsets: []sink.OffsetUpdate{{TopicPartition: p0, Expected: 3, Next: 5}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, &sink.Batch{Offsets: []sink.OffsetUpdate{{TopicPartition: p0, Expected: 5, Next: 9}, {TopicPartition: p1, Expected: -1, Next: 1}}}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Offsets(ctx, []record.TopicPartition{p0, p1, {Topic: "a", Partition: 7}})
	if err != nil || fmt.Sprint(got) != "map[a/0:9 a/1:1]" {
		t.Errorf("Offsets(a/0, a/1, a/7) = %v, %v; want a/0:9 a/1:1", got, err)
	}
	got, err = s.Offsets(ctx, nil)
	if err != nil || fmt.Sprint(got) != "map[a/0:9 a/1:1 b/0:100]" {
		t.Errorf("Offsets(nil) = %v, %v; want every partition of the group", got, err)
	}
	// Another group sees none of them.
	other := d.open(t, Options{Group: "other-" + d.Schema})
	if got, err := other.Offsets(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("another group's Offsets = %v, %v; want empty", got, err)
	}
	if n := d.Count(t, "SELECT count(*) FROM processor_records"); n != 5 {
		t.Errorf("%d rows, want 5", n)
	}
	// An empty batch does nothing.
	if err := s.Commit(ctx, &sink.Batch{}); err != nil {
		t.Error(err)
	}
}

func TestCommitFenced(t *testing.T) {
	d := newTestDB(t)
	m := NewMetrics(prometheus.NewRegistry())
	s := d.open(t, Options{Metrics: m})
	ctx := testCtx(t)
	p0, p1, p2 := record.TopicPartition{Topic: "in", Partition: 0}, record.TopicPartition{Topic: "in", Partition: 1}, record.TopicPartition{Topic: "in", Partition: 2}
	if err := s.Commit(ctx, &sink.Batch{Rows: rows("in", 0, 0, 10), Offsets: []sink.OffsetUpdate{{TopicPartition: p0, Expected: -1, Next: 10}, {TopicPartition: p1, Expected: -1, Next: 5}, {TopicPartition: p2, Expected: -1, Next: 3}}}); err != nil {
		t.Fatal(err)
	}
	before := d.Count(t, "SELECT count(*) FROM processor_records")
	// p0 matches; p1 expects another offset; p2 has a row already.
	err := s.Commit(ctx, &sink.Batch{
		Rows:        append(rows("in", 0, 10, 4), rows("in", 1, 7, 2)...),
		DeadLetters: []sink.DeadLetter{{Row: rows("in", 2, 3, 1)[0], Error: "boom", Stage: "jq", Attempts: 1}},
		Offsets:     []sink.OffsetUpdate{{TopicPartition: p2, Expected: -1, Next: 4}, {TopicPartition: p1, Expected: 7, Next: 9}, {TopicPartition: p0, Expected: 10, Next: 14}},
	})
	var fe *sink.FencedError
	if !errors.As(err, &fe) {
		t.Fatalf("Commit = %v, want a *sink.FencedError", err)
	}
	if fmt.Sprint(fe.Partitions) != "[in/1 in/2]" || fmt.Sprint(fe.Stored) != "map[in/1:5 in/2:3]" {
		t.Errorf("FencedError{Partitions: %v, Stored: %v}, want [in/1 in/2] and in/1:5 in/2:3", fe.Partitions, fe.Stored)
	}
	if Retriable(err) || !strings.Contains(err.Error(), "in/1 (now 5)") {
		t.Errorf("Retriable(%v) = %v", err, Retriable(err))
	}
	// Nothing of the batch is visible: rows, dead letters, p0's offset.
	if n := d.Count(t, "SELECT count(*) FROM processor_records"); n != before {
		t.Errorf("%d rows after the fenced batch, want %d", n, before)
	}
	if n := d.Count(t, "SELECT count(*) FROM processor_dead_letters"); n != 0 {
		t.Errorf("%d dead letters after the fenced batch, want 0", n)
	}
	got, _ := s.Offsets(ctx, nil)
	if fmt.Sprint(got) != "map[in/0:10 in/1:5 in/2:3]" {
		t.Errorf("offsets after the fenced batch = %v, want unchanged", got)
	}
	if testutil.ToFloat64(m.Rollbacks.WithLabelValues(RollbackFenced)) != 1 || testutil.ToFloat64(m.Commits) != 1 || roundTrips(t, m) != 2 {
		t.Errorf("metrics: fenced %v, commits %v, round trips %d; want 1, 1, 2", testutil.ToFloat64(m.Rollbacks.WithLabelValues(RollbackFenced)),
			testutil.ToFloat64(m.Commits), roundTrips(t, m))
	}
	// Resuming from the stored offsets works.
	if err := s.Commit(ctx, &sink.Batch{Rows: rows("in", 1, 5, 2), Offsets: []sink.OffsetUpdate{{TopicPartition: p1, Expected: 5, Next: 7}}}); err != nil {
		t.Fatal(err)
	}
}

// A Commit whose context is already done writes nothing and says so: the
// error is the context's (errors.Is finds it).
func TestCommitCanceled(t *testing.T) {
	d := newTestDB(t)
	s := d.open(t, Options{})
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	err := s.Commit(ctx, &sink.Batch{Rows: rows("in", 0, 0, 3), Offsets: []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 0}, Expected: -1, Next: 3}}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Commit with a canceled context = %v, want context.Canceled", err)
	}
	if n := d.Count(t, "SELECT count(*) FROM processor_offsets"); n != 0 {
		t.Errorf("%d offsets stored by a canceled Commit", n)
	}
}

func TestDeadLetters(t *testing.T) {
	d := newTestDB(t)
	m := NewMetrics(prometheus.NewRegistry())
	s := d.open(t, Options{Metrics: m})
	ctx := testCtx(t)
	ts := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	dl := sink.DeadLetter{
		Row:   sink.Row{Key: []byte("k"), Value: []byte{0xff, 0x00, 'x'}, Timestamp: ts, Topic: "in", Partition: 2, Offset: 41, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
		Error: "jq: bad input\x00 \xff", Stage: "jq", Attempts: 3,
	}
	err := s.Commit(ctx, &sink.Batch{
		Rows:        rows("in", 2, 40, 1),
		DeadLetters: []sink.DeadLetter{dl},
		Offsets:     []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 2}, Expected: -1, Next: 42}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		topic, errText, stage, headers string
		part, attempts                 int
		off                            int64
		key, value                     []byte
		gotTS                          time.Time
		failedAt                       *time.Time
	)
	err = d.Admin.QueryRow(ctx, `SELECT src_topic, src_partition, src_offset, key, value, headers::text, ts, error, stage, attempts, failed_at
		FROM processor_dead_letters`).Scan(&topic, &part, &off, &key, &value, &headers, &gotTS, &errText, &stage, &attempts, &failedAt)
	if err != nil {
		t.Fatal(err)
	}
	if topic != "in" || part != 2 || off != 41 || string(key) != "k" || string(value) != "\xff\x00x" || !gotTS.Equal(ts) ||
		errText != "jq: bad input \uFFFD" || stage != "jq" || attempts != 3 || failedAt == nil || headers != `[{"key": "h", "value": "v"}]` {
		t.Errorf("dead letter = %s %d %d %q %q %s %v %q %q %d %v", topic, part, off, key, value, headers, gotTS, errText, stage, attempts, failedAt)
	}
	// A dead letter the table refuses: a *sink.RowError marked DeadLetter, and
	// nothing of the batch.
	d.exec(t, "ALTER TABLE processor_dead_letters ADD CONSTRAINT few_attempts CHECK (attempts < 100)")
	bad := dl
	bad.Attempts = 1000
	err = s.Commit(ctx, &sink.Batch{
		Rows:        rows("in", 2, 42, 1),
		DeadLetters: []sink.DeadLetter{dl, bad},
		Offsets:     []sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "in", Partition: 2}, Expected: 42, Next: 44}},
	})
	var re *sink.RowError
	if !errors.As(err, &re) || !re.DeadLetter || re.Index != 1 || Retriable(err) || !strings.Contains(err.Error(), "in/2@41") {
		t.Fatalf("Commit = %v, want a *sink.RowError for dead letter 1", err)
	}
	if n := d.Count(t, "SELECT count(*) FROM processor_dead_letters"); n != 1 {
		t.Errorf("%d dead letters, want 1", n)
	}
	if n := d.Count(t, "SELECT count(*) FROM processor_records"); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
	if got, _ := s.Offsets(ctx, nil); got[record.TopicPartition{Topic: "in", Partition: 2}] != 42 {
		t.Errorf("offset %v, want 42", got)
	}
	if testutil.ToFloat64(m.Rollbacks.WithLabelValues(RollbackRow)) != 1 {
		t.Errorf("rollbacks{row} = %v, want 1", testutil.ToFloat64(m.Rollbacks.WithLabelValues(RollbackRow)))
	}
}

// TestOpenLeastPrivilege runs the sink as a user who may only write the
// tables, which were created beforehand: Open does not try to create them,
// and neither Open nor Commit needs to read the output tables.
func TestOpenLeastPrivilege(t *testing.T) {
	d := newTestDB(t)
	ctx := testCtx(t)
	d.open(t, Options{}) // creates the tables as the test's superuser
	_, writerURL := d.writer(t)
	s := d.open(t, Options{URL: writerURL})
	p := record.TopicPartition{Topic: "in", Partition: 0}
	err := s.Commit(ctx, &sink.Batch{
		Rows:        rows("in", 0, 0, 3),
		DeadLetters: []sink.DeadLetter{{Row: rows("in", 0, 3, 1)[0], Error: "e", Stage: "s", Attempts: 1}},
		Offsets:     []sink.OffsetUpdate{{TopicPartition: p, Expected: -1, Next: 4}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Count(t, "SELECT count(*) FROM processor_records"); n != 3 {
		t.Errorf("%d rows, want 3", n)
	}
	// Without the right to create, a missing table is a plain error that
	// says what to grant.
	_, err = Open(ctx, Options{URL: writerURL, Group: "g", Table: "not_created"})
	var ce *settings.Error
	if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "grant") {
		t.Errorf("Open with a table it may not create = %v, want a plain error saying what to grant", err)
	}
	t.Logf("Open with a table it may not create: %v", err)
}

// roundTrips is how many round trips m's histogram observed.
func roundTrips(t *testing.T, m *Metrics) uint64 {
	t.Helper()
	var pb dto.Metric
	if err := m.RoundTrip.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount()
}
