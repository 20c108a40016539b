package jq

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/transformtest"
)

func newJQ(t *testing.T, expr string) *Transform {
	t.Helper()
	tr, err := New(&Settings{Expr: expr})
	if err != nil {
		t.Fatal(err)
	}
	return tr.(*Transform)
}

func rec(v string) *kgo.Record {
	return &kgo.Record{
		Key: []byte("order-1"), Value: []byte(v), Topic: "routed",
		Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte("1")}},
		Timestamp: time.UnixMilli(1_700_000_000_000),
	}
}

var src = record.Source{Topic: "orders", Partition: 1, Offset: 7}

func run(t *testing.T, tr *Transform, r *kgo.Record) []string {
	t.Helper()
	out, err := tr.Process(context.Background(), src, r, nil)
	if err != nil {
		t.Fatalf("%s: %v", r.Value, err)
	}
	var vs []string
	for _, o := range out {
		vs = append(vs, string(o.Value))
	}
	return vs
}

func TestMap(t *testing.T) {
	tr := newJQ(t, ".amount_cents *= 2")
	r := rec(`{"id": 12345678901234567890, "amount_cents": 250, "b": true, "a": [1.5, null]}`)
	out, err := tr.Process(context.Background(), src, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Numbers keep their precision; keys come out sorted.
	want := `{"a":[1.5,null],"amount_cents":500,"b":true,"id":12345678901234567890}`
	if len(out) != 1 || out[0] != r || string(r.Value) != want {
		t.Fatalf("got %q, want %q in the input record", r.Value, want)
	}
	if string(r.Key) != "order-1" || len(r.Headers) != 1 || r.Topic != "routed" {
		t.Errorf("key, headers or topic changed: %+v", r)
	}
}

func TestFilter(t *testing.T) {
	tr := newJQ(t, `select(.status == "paid")`)
	if got := run(t, tr, rec(`{"status":"paid"}`)); len(got) != 1 || got[0] != `{"status":"paid"}` {
		t.Errorf("paid: %q", got)
	}
	if got := run(t, tr, rec(`{"status":"open"}`)); len(got) != 0 {
		t.Errorf("open should be filtered out: %q", got)
	}
	if got := run(t, newJQ(t, "empty"), rec(`1`)); len(got) != 0 {
		t.Errorf("empty: %q", got)
	}
}

func TestFlatMap(t *testing.T) {
	tr := newJQ(t, `.order as $o | .items[] | {order: $o, sku}`)
	r := rec(`{"order": 9, "items": [{"sku": "a"}, {"sku": "b"}, {"sku": "c"}]}`)
	out, err := tr.Process(context.Background(), src, r, make([]*kgo.Record, 1, 8))
	if err != nil {
		t.Fatal(err)
	}
	out = out[1:]
	want := []string{`{"order":9,"sku":"a"}`, `{"order":9,"sku":"b"}`, `{"order":9,"sku":"c"}`}
	if len(out) != 3 {
		t.Fatalf("got %d records, want 3", len(out))
	}
	if out[0] != r {
		t.Error("the first result should reuse the input record")
	}
	for i, o := range out {
		if string(o.Value) != want[i] || string(o.Key) != "order-1" || o.Topic != "routed" || !o.Timestamp.Equal(r.Timestamp) ||
			len(o.Headers) != 1 || o.Headers[0].Key != "h" {
			t.Errorf("record %d: %+v", i, o)
		}
	}
	if &out[1].Headers[0] == &out[0].Headers[0] || &out[2].Headers[0] == &out[1].Headers[0] {
		t.Error("new records must get their own header slices")
	}
}

func TestRecordErrors(t *testing.T) {
	cases := []struct{ expr, value, want string }{
		{".a", `{"a":`, "the value is not JSON: unexpected EOF"},
		{".a", `{"a":1} x`, "the value is not JSON: data after the value at offset 7"},
		{".a", `not json`, "the value is not JSON: invalid character"},
		{".a + 1", `{"a":"x"}`, "jq: cannot add: string (\"x\") and number (1)"},
		{`error("bad order")`, `{}`, "jq: error: bad order"},
		{"repeat(.)", `1`, "more than 10000 results"},
	}
	for _, c := range cases {
		tr := newJQ(t, c.expr)
		r := rec(c.value)
		out, err := tr.Process(context.Background(), src, r, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on %s: got %v, want an error containing %q", c.expr, c.value, err, c.want)
		}
		if len(out) != 0 || string(r.Value) != c.value {
			t.Errorf("%s on %s: a failed record must produce nothing and stay as it was", c.expr, c.value)
		}
	}
	tr := newJQ(t, ".")
	if _, err := tr.Process(context.Background(), src, &kgo.Record{}, nil); err == nil || !strings.Contains(err.Error(), "null (a tombstone)") {
		t.Errorf("a tombstone: %v", err)
	}
}

// A cancelled context (shutdown) stays visible through the error.
func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr := newJQ(t, "[range(100000)] | length")
	_, err := tr.Process(ctx, src, rec(`1`), nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// The environment is hidden from programs.
func TestNoEnvironment(t *testing.T) {
	t.Setenv("PROCESSOR_SECRET", "hunter2")
	if got := run(t, newJQ(t, "[$ENV.PROCESSOR_SECRET, env.PROCESSOR_SECRET]"), rec(`1`)); got[0] != "[null,null]" {
		t.Errorf("the environment leaked: %s", got)
	}
}

// A missing or broken program is a one-line *settings.Error
// naming EXPR, with the compiler's complaint.
func TestSettingErrors(t *testing.T) {
	cases := map[string]string{
		"":                   "setting EXPR is not set: want a jq program",
		".a |":               `setting EXPR=".a |" is invalid: want a jq program such as .amount_cents *= 2, select(.status == "paid") or .items[] (unexpected EOF at offset 4)`,
		"nosuch":             "function not defined: nosuch/0",
		"$missing":           "variable not defined: $missing",
		`import "x" as x; .`: "cannot load module",
		"input":              "input(s)/0 is not allowed",
	}
	for expr, want := range cases {
		_, err := transformtest.Build("jq", map[string]string{"EXPR": expr})
		var se *settings.Error
		if !errors.As(err, &se) || se.Field != "EXPR" || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want a one-line *settings.Error containing %q", expr, err, want)
		}
	}
	// Not given at all: EXPR is required.
	if _, err := transformtest.Build("jq", nil); err == nil || !strings.Contains(err.Error(), "setting EXPR is not set: want a jq program") {
		t.Errorf("no EXPR: %v", err)
	}
}

// Two entries of jq, one aliased, each get their own program through the
// registry, as the processor's wiring builds them.
func TestAliasesThroughRegistry(t *testing.T) {
	spec, ok := transform.Default.Lookup("jq")
	if !ok {
		t.Fatal(`"jq" is not registered`)
	}
	reg := &transform.Registry{}
	reg.Register("jq", spec)
	exprs := map[string]string{"jq": ".a", "jq@second": ".b"}
	chain, err := reg.Build([]transform.Entry{{Name: "jq"}, {Name: "jq", Alias: "second"}}, func(e transform.Entry, setting string) (string, bool) {
		v, ok := exprs[e.String()]
		return v, ok && setting == "EXPR"
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := chain.Process(context.Background(), src, rec(`{"a":{"b":"deep"}}`), nil)
	if err != nil || len(out) != 1 || string(out[0].Value) != `"deep"` {
		t.Fatalf("got %v, %v", out, err)
	}
}

// The program "." is run without gojq: only it, whatever its spacing, and
// with the results gojq gives, a cancelled context included.
func TestIdentityProgram(t *testing.T) {
	for expr, want := range map[string]bool{
		".": true, " . ": true, "# the record\n.": true,
		"(.)": false, ".|.": false, "..": false, ".a": false, ".[]": false, ".?": false,
		"def f: .; .": false, ". as $x | .": false, "., .": false,
	} {
		p, err := Compile(expr)
		if err != nil {
			t.Fatal(expr, err)
		}
		if p.identity != want {
			t.Errorf("%q: identity %v, want %v", expr, p.identity, want)
		}
	}
	code, err := gojq.Compile(&identityQuery)
	if err != nil {
		t.Fatal(err)
	}
	ref := &Program{code: code}
	for _, in := range fastCorpus {
		v, err := ParseValue([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		got, want := results(t, newJQ(t, ".").prog, v, false), results(t, ref, v, true)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%.60q: %q, gojq %q", in, got, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := newJQ(t, ".").Process(ctx, src, rec(`1`), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
	iter := newJQ(t, ".").prog.Run(ctx, 1)
	if v, _ := iter.Next(); !errors.Is(v.(error), context.Canceled) {
		t.Errorf("Run, cancelled: got %v, want context.Canceled", v)
	}
	if v, ok := iter.Next(); ok {
		t.Errorf("Run, cancelled: a second result %v", v)
	}
}
