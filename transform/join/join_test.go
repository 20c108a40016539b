package join

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
)

// rows is a table as a map per partition, the reference the join's
// outputs are compared with.
type rows struct {
	parts  map[int32]map[string]string
	misses int
}

func (r *rows) Lookup(p int32, key []byte) ([]byte, bool, error) {
	v, ok := r.parts[p][string(key)]
	return []byte(v), ok, nil
}

func (r *rows) Miss() { r.misses++ }

func build(t *testing.T, s Settings) *Transform {
	t.Helper()
	if s.Type == "" {
		s.Type = "inner"
	}
	if s.Mode == "" {
		s.Mode = "co_partitioned"
	}
	tr, err := New(&s)
	if err != nil {
		t.Fatal(err)
	}
	return tr.(*Transform)
}

func run(t *testing.T, tr *Transform, p int32, key, value string) (string, bool) {
	t.Helper()
	out, err := tr.Process(context.Background(), record.Source{Topic: "in", Partition: p}, &kgo.Record{Key: []byte(key), Value: []byte(value)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		return "", false
	}
	return string(out[0].Value), true
}

func TestJoin(t *testing.T) {
	tb := &rows{parts: map[int32]map[string]string{
		0: {"c1": `{"name":"Ann"}`, "42": `{"name":"num"}`},
		1: {"c1": `{"name":"other partition"}`},
	}}
	inner := build(t, Settings{Table: "customers", Into: ".customer"})
	inner.BindTable("customers", tb)
	cases := []struct {
		tr        *Transform
		p         int32
		key, val  string
		want      string
		filtered  bool
		missAfter int
	}{
		{inner, 0, "c1", `{"n":1}`, `{"customer":{"name":"Ann"},"n":1}`, false, 0},
		{inner, 1, "c1", `{"n":1}`, `{"customer":{"name":"other partition"},"n":1}`, false, 0},
		{inner, 0, "c9", `{"n":1}`, "", true, 1},
		{build(t, Settings{Table: "customers", Type: "left", Into: ".customer"}), 0, "c9", `{"n":1}`, `{"customer":null,"n":1}`, false, 2},
		{build(t, Settings{Table: "customers", By: ".c", Into: ".x.y"}), 0, "k", `{"c":"c1"}`, `{"c":"c1","x":{"y":{"name":"Ann"}}}`, false, 2},
		{build(t, Settings{Table: "customers", By: ".c", Into: ".x"}), 0, "k", `{"c":42}`, `{"c":42,"x":{"name":"num"}}`, false, 2},
		{build(t, Settings{Table: "customers", By: ".c", Type: "left", Into: ".x"}), 0, "k", `{"c":null}`, `{"c":null,"x":null}`, false, 3},
		{build(t, Settings{Table: "customers", Expr: `{id: .record.n, who: .row.name}`}), 0, "c1", `{"n":7}`, `{"id":7,"who":"Ann"}`, false, 3},
		{build(t, Settings{Table: "customers", Expr: `.record | select(.n > 1)`, Type: "left"}), 0, "c1", `{"n":1}`, "", true, 3},
	}
	for i, c := range cases {
		c.tr.BindTable("customers", tb)
		got, ok := run(t, c.tr, c.p, c.key, c.val)
		if ok == c.filtered || got != c.want {
			t.Errorf("case %d: got %q (passed %v), want %q (filtered %v)", i, got, ok, c.want, c.filtered)
		}
		if tb.misses != c.missAfter {
			t.Errorf("case %d: %d misses, want %d", i, tb.misses, c.missAfter)
		}
	}
}

func TestJoinSettings(t *testing.T) {
	for _, s := range []Settings{
		{Type: "inner", Mode: "global", Into: ".a"},
		{Table: "t", Type: "outer", Mode: "global", Into: ".a"},
		{Table: "t", Type: "inner", Mode: "local", Into: ".a"},
		{Table: "t", Type: "inner", Mode: "global"},
		{Table: "t", Type: "inner", Mode: "global", Into: ".a", Expr: "."},
		{Table: "t", Type: "inner", Mode: "global", Into: "1 +"},
		{Table: "t", Type: "inner", Mode: "global", Expr: ".", By: "{"},
	} {
		var se *settings.Error
		if _, err := New(&s); !errors.As(err, &se) {
			t.Errorf("%+v: %v, want a setting error", s, err)
		}
	}
	tr := build(t, Settings{Table: "t", Mode: "global", Into: ".a"})
	if refs := tr.JoinTables(); len(refs) != 1 || refs[0].Topic != "t" || !refs[0].Global {
		t.Fatalf("JoinTables %+v", refs)
	}
	if _, err := tr.Process(context.Background(), record.Source{}, &kgo.Record{Value: []byte("{}")}, nil); !errors.Is(err, errNoTable) {
		t.Fatalf("unbound: %v", err)
	}
}

// Numbers keep their text through the join, in the record and the row
// (as the jq transform keeps them), and strings are not HTML-escaped.
func TestJoinKeepsNumbers(t *testing.T) {
	tb := &rows{parts: map[int32]map[string]string{0: {"c": `{"big":12345678901234567890123,"f":1.5,"e":1e400,"s":"<&>"}`}}}
	tr := build(t, Settings{Table: "t", Into: ".r"})
	tr.BindTable("t", tb)
	got, _ := run(t, tr, 0, "c", `{"n":0.1,"m":-0}`)
	if want := `{"m":-0,"n":0.1,"r":{"big":12345678901234567890123,"e":1e400,"f":1.5,"s":"<&>"}}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
