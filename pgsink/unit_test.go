package pgsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests need no database.

func TestParseStatement(t *testing.T) {
	for _, tc := range []struct {
		src, sql string
		params   []param
	}{
		{
			src:    "INSERT INTO t (k, v) VALUES (@key, @value::jsonb)",
			sql:    "INSERT INTO t (k, v) VALUES (($1::bytea), ($2::text)::jsonb)",
			params: []param{{kind: paramKey}, {kind: paramValue}},
		},
		{ // a name used twice is one parameter
			src:    "UPDATE t SET a = @offset WHERE b = @offset AND c = @seq",
			sql:    "UPDATE t SET a = ($1::int8) WHERE b = ($1::int8) AND c = ($2::int4)",
			params: []param{{kind: paramOffset}, {kind: paramSeq}},
		},
		{ // not parameters: literals, quoted identifiers, comments, dollar quotes, operators
			src:    `INSERT INTO "t@x" VALUES ('@key', E'\'@key', 'it''s @key', $$@key$$, $q$ @key $q$, @topic) -- @key` + "\n/* @key /* @key */ */ RETURNING a @@ b, a@>b, @timestamp",
			sql:    `INSERT INTO "t@x" VALUES ('@key', E'\'@key', 'it''s @key', $$@key$$, $q$ @key $q$, ($1::text)) -- @key` + "\n/* @key /* @key */ */ RETURNING a @@ b, a@>b, ($2::timestamptz)",
			params: []param{{kind: paramTopic}, {kind: paramTimestamp}},
		},
		{
			src:    "  -- leading comment\n WITH x AS (SELECT @header_trace_id AS h, @key_text, @value_text, @value_bytes, @partition) SELECT * FROM x",
			sql:    "  -- leading comment\n WITH x AS (SELECT ($1::text) AS h, ($2::text), ($3::text), ($4::bytea), ($5::int4)) SELECT * FROM x",
			params: []param{{kind: paramHeader, header: "trace_id"}, {kind: paramKeyText}, {kind: paramValueText}, {kind: paramValueBytes}, {kind: paramPartition}},
		},
		{ // identifiers with $ are not dollar quotes
			src:    "insert into a$b values (@seq)",
			sql:    "insert into a$b values (($1::int4))",
			params: []param{{kind: paramSeq}},
		},
	} {
		st, err := parseStatement(tc.src)
		if err != nil {
			t.Errorf("parseStatement(%q): %v", tc.src, err)
			continue
		}
		if st.sql != tc.sql {
			t.Errorf("parseStatement(%q).sql =\n%q, want\n%q", tc.src, st.sql, tc.sql)
		}
		if fmt.Sprint(st.params) != fmt.Sprint(tc.params) {
			t.Errorf("parseStatement(%q).params = %v, want %v", tc.src, st.params, tc.params)
		}
	}
}

func TestParseStatementRefuses(t *testing.T) {
	for src, want := range map[string]string{
		"INSERT INTO t VALUES (@bogus)":      "@bogus is not one",
		"INSERT INTO t VALUES (@header_)":    "@header_ is not one",
		"INSERT INTO t VALUES (@Key)":        "@Key is not one",
		"INSERT INTO t VALUES ($1)":          "positional parameters",
		"INSERT INTO t VALUES ('open":        "string literal is not terminated",
		`INSERT INTO "open VALUES (1)`:       "quoted identifier",
		"INSERT INTO t VALUES (1) /* open":   "comment",
		"INSERT INTO t VALUES ($x$ open)":    "$tag$",
		"COMMIT":                             `not "COMMIT"`,
		"-- only a comment":                  `not ""`,
		"DROP TABLE t; INSERT INTO t VALUES": `not "DROP"`,
	} {
		_, err := parseStatement(src)
		var ce *settings.Error
		if !errors.As(err, &ce) || ce.Field != SettingStatement || !strings.Contains(ce.Want.String(), want) {
			t.Errorf("parseStatement(%q) = %v, want a STATEMENT *settings.Error saying %q", src, err, want)
		}
	}
}

func TestStatementArgs(t *testing.T) {
	st, err := parseStatement("SELECT @key, @key_text, @value, @value_text, @value_bytes, @topic, @partition, @offset, @seq, @timestamp, @header_a, @header_missing, @header_nil")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1, 0)
	r := sink.Row{Key: []byte("k"), Value: []byte(`{"a":1}`), Topic: "in", Partition: 3, Offset: 7, Seq: 2, Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("first")}, {Key: "a", Value: []byte("second")}, {Key: "nil"}}}
	args, err := st.args(&r)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{[]byte("k"), "k", `{"a":1}`, `{"a":1}`, []byte(`{"a":1}`), "in", int32(3), int64(7), int32(2), ts, "first", nil, nil}
	if fmt.Sprintf("%#v", args) != fmt.Sprintf("%#v", want) {
		t.Errorf("args =\n%#v, want\n%#v", args, want)
	}
	// A nil key and value, and a zero timestamp, are NULL.
	args, _ = st.args(&sink.Row{Topic: "in"})
	for _, i := range []int{1, 2, 3, 9} {
		if args[i] != nil {
			t.Errorf("args[%d] = %#v, want nil", i, args[i])
		}
	}
	if _, err := st.args(&sink.Row{Value: []byte("not json")}); !errors.Is(err, errNotJSON) {
		t.Errorf("a value that is not JSON: %v, want errNotJSON", err)
	}
}

func TestAppendHeaders(t *testing.T) {
	hs := []kgo.RecordHeader{
		{Key: "plain", Value: []byte("v \"quoted\" \\ \n\t\x01 é")},
		{Key: "binary", Value: []byte{0xff, 0xfe}},
		{Key: "nul", Value: []byte("a\x00b")},
		{Key: "nil"},
		{Key: "bad\xffkey", Value: []byte("x")},
	}
	b := appendHeaders(nil, hs)
	if !json.Valid(b) {
		t.Fatalf("not JSON: %s", b)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"key": "plain", "value": "v \"quoted\" \\ \n\t\x01 é"},
		{"key": "binary", "value_base64": "//4="},
		{"key": "nul", "value_base64": "YQBi"},
		{"key": "nil", "value": nil},
		{"key_base64": "YmFk/2tleQ==", "value": "x"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("headers = %v, want %v", got, want)
	}
}

func TestStorableJSON(t *testing.T) {
	for v, want := range map[string]bool{
		`{"a":1}`:         true,
		`[1,2]`:           true,
		`"s"`:             true,
		`12`:              true,
		``:                false,
		`{"a":`:           false,
		"\"\xff\"":        false, // not UTF-8
		`{"a":"\u0000"}`:  false, // jsonb refuses NUL
		`{"a":"x\u0041"}`: true,
		`{"a":"\\u0000"}`: true,  // an escaped backslash, then text
		`"\ud83d"`:        false, // half an emoji
		`"\ud83d\ude00"`:  true,
		`"\ude00"`:        false,
		`"\ud83d\u0041"`:  false,
		`"\ud83d\ud83d"`:  false,
		`1e131071`:        true,
		`-1E+131072`:      false,
		`0e-16383`:        true,
		`0e-16384`:        false,
		`0e1073741823`:    false, // numeric_in's bound on the exponent
		`[1.5e-16382]`:    true,
		`[1.5e-16383]`:    false,
	} {
		if got := storableJSON([]byte(v)); got != want {
			t.Errorf("storableJSON(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestParseTable(t *testing.T) {
	for _, ok := range []string{"records", "billing.invoices", "Mixed_Case", "_x$1"} {
		if _, err := parseTable(SettingTable, ok); err != nil {
			t.Errorf("parseTable(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b.c", "1abc", "a-b", `"quoted"`, "a.", ".b", "a b", strings.Repeat("x", 64), "tab;drop"} {
		var ce *settings.Error
		if _, err := parseTable(SettingDeadLetterTable, bad); !errors.As(err, &ce) || ce.Field != SettingDeadLetterTable {
			t.Errorf("parseTable(%q) = %v, want a DEAD_LETTER_TABLE *settings.Error", bad, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db":               "postgres://u:xxxxx@h:5432/db",
		"postgres://u:se@cret@h/db":                   "postgres://xxxxx", // libpq would take cret@h for the host
		"postgres://u@h/db?password=secret&sslmode=x": "postgres://u@h/db?password=xxxxx&sslmode=x",
		"postgres://h/db":                             "postgres://h/db",
		"postgres://u:secret@h:notaport/db":           "postgres://u:xxxxx@h:notaport/db",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenRefusesBadSettings(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		o       Options
		setting string
	}{
		{Options{URL: "mysql://u:secret@h/db"}, SettingURL},
		{Options{URL: "postgres://u:secret@h:notaport/db"}, SettingURL},
		{Options{URL: "postgres://u:secret@h/db?connect_timeout=soon"}, SettingURL},
		{Options{URL: "postgres://h/db", Table: "a-b"}, SettingTable},
		{Options{URL: "postgres://h/db", DeadLetterTable: "x.y.z"}, SettingDeadLetterTable},
		{Options{URL: "postgres://h/db", OffsetsTable: "1x"}, SettingOffsetsTable},
		{Options{URL: "postgres://h/db", Statement: "INSERT INTO t VALUES (@nope)"}, SettingStatement},
	} {
		tc.o.Group = "g"
		_, err := Open(ctx, tc.o)
		var ce *settings.Error
		if !errors.As(err, &ce) || ce.Field != tc.setting {
			t.Errorf("Open(%+v) = %v, want a %s *settings.Error", tc.o, err, tc.setting)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the password: %v", err)
		}
		if Retriable(err) {
			t.Errorf("Retriable(%v) = true", err)
		}
	}
	if _, err := Open(ctx, Options{URL: "postgres://h/db"}); err == nil {
		t.Error("Open without a group succeeded")
	}
}

func TestRetriable(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code}) }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{pg("57P01"), true},
		{pg("57P03"), true},
		{pg("40001"), true},
		{pg("40P01"), true},
		{pg("08006"), true},
		{pg("23505"), false},
		{pg("28P01"), false},
		{pg("42601"), false},
		{&connLostError{err: errors.New("x")}, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("x: %w", context.Canceled), false},
		{&sink.FencedError{}, false},
		{&sink.RowError{Err: pg("40001")}, false},
		{&settings.Error{}, false},
		{errors.New("other"), false},
	} {
		if got := Retriable(tc.err); got != tc.want {
			t.Errorf("Retriable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestSortedOffsets(t *testing.T) {
	us := []sink.OffsetUpdate{
		{TopicPartition: record.TopicPartition{Topic: "b", Partition: 0}, Expected: -1, Next: 1},
		{TopicPartition: record.TopicPartition{Topic: "a", Partition: 2}, Expected: 5, Next: 6},
		{TopicPartition: record.TopicPartition{Topic: "a", Partition: 1}, Expected: 5, Next: 6},
	}
	got, err := sortedOffsets(us)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[a/1 5->6 a/2 5->6 b/0 -1->1]" {
		t.Errorf("sorted = %v", got)
	}
	if us[0].Topic != "b" {
		t.Error("sortedOffsets reordered the caller's slice")
	}
	if _, err := sortedOffsets([]sink.OffsetUpdate{{TopicPartition: record.TopicPartition{Topic: "a", Partition: 0}, Expected: -1, Next: 0}}); err != nil {
		t.Errorf("sortedOffsets refused a first update to offset 0: %v", err)
	}
	for _, bad := range [][]sink.OffsetUpdate{
		{{TopicPartition: record.TopicPartition{Topic: "a", Partition: 0}, Expected: -2, Next: 1}},
		{{TopicPartition: record.TopicPartition{Topic: "a", Partition: 0}, Expected: 0, Next: -1}},
		{{TopicPartition: record.TopicPartition{Topic: "a", Partition: 0}, Expected: 0, Next: 1}, {TopicPartition: record.TopicPartition{Topic: "a", Partition: 0}, Expected: 1, Next: 2}},
	} {
		if _, err := sortedOffsets(bad); err == nil {
			t.Errorf("sortedOffsets(%v) accepted it", bad)
		}
	}
}

func TestCopyLine(t *testing.T) {
	err := fmt.Errorf("x: %w", &pgconn.PgError{Code: "22P02", Where: `COPY processor_records, line 17, column value: "x"`})
	if i, col, ok := copyLine(err); !ok || i != 16 || col != "value" {
		t.Errorf("copyLine = %d, %q, %v; want 16, value, true", i, col, ok)
	}
	first := &pgconn.PgError{Code: "22P02", Where: `COPY processor_records, line 1, column value: "x"`}
	if i, _, ok := copyLine(first); !ok || i != 0 {
		t.Errorf("copyLine of line 1 = %d, %v; want 0, true", i, ok)
	}
	if _, _, ok := copyLine(&pgconn.PgError{Code: "22P02", Where: `COPY processor_records, line 0, column value`}); ok {
		t.Error("copyLine accepted line 0")
	}
	if _, _, ok := copyLine(errors.New("x")); ok {
		t.Error("copyLine of a non-PostgreSQL error")
	}
	// PostgreSQL puts the innermost context first: the JSON parser's, a
	// trigger's. The COPY line is the last.
	for where, want := range map[string]struct {
		i   int
		col string
	}{
		"JSON data, line 1: {\"s\":\"\\ud83d...\nCOPY processor_records, line 3, column value":                                     {2, "value"},
		"PL/pgSQL function refuse() line 3 at RAISE\nCOPY records, line 12":                                                        {11, ""},
		"SQL statement \"SELECT 1\nCOPY other, line 99\"\nPL/pgSQL function f() line 2 at PERFORM\nCOPY t, line 5, column headers": {4, "headers"},
	} {
		i, col, ok := copyLine(&pgconn.PgError{Code: "22P02", Where: where})
		if !ok || i != want.i || col != want.col {
			t.Errorf("copyLine(%q) = %d, %q, %v; want %d, %q", where, i, col, ok, want.i, want.col)
		}
	}
}
