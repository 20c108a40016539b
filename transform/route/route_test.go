package route

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform/transformtest"
)

var src = record.Source{Topic: "orders", Partition: 0, Offset: 1}

func newRoute(t *testing.T, s Settings) *Transform {
	t.Helper()
	tr, err := New(&s)
	if err != nil {
		t.Fatal(err)
	}
	return tr.(*Transform)
}

// route returns the topic chosen for r, or the error.
func route(tr *Transform, r *kgo.Record) (string, error) {
	out, err := tr.Process(context.Background(), src, r, nil)
	if err != nil {
		if len(out) != 0 || r.Topic != "" {
			return "", errors.New("a failed record must produce nothing and keep its topic")
		}
		return "", err
	}
	if len(out) != 1 || out[0] != r {
		return "", errors.New("route must pass the record itself on")
	}
	return r.Topic, nil
}

func TestByExpr(t *testing.T) {
	tr := newRoute(t, Settings{Expr: `"orders-" + .region`})
	if got, err := route(tr, &kgo.Record{Value: []byte(`{"region":"eu"}`)}); err != nil || got != "orders-eu" {
		t.Errorf("got %q, %v", got, err)
	}
	for v, want := range map[string]string{
		`{"region":1}`:   "jq: cannot add: string", // a runtime error
		`{"region":"a`:   "the value is not JSON",  // not JSON
		`{"region":" "}`: `result "orders- " is not a topic name`,
	} {
		if _, err := route(tr, &kgo.Record{Value: []byte(v)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", v, err, want)
		}
	}
	tr = newRoute(t, Settings{Expr: `.dest`})
	for v, want := range map[string]string{
		`{"dest":3}`:   "result is a number, not a string",
		`{}`:           "result is null, not a string",
		`{"dest":[1]}`: "result is an array, not a string",
	} {
		if _, err := route(tr, &kgo.Record{Value: []byte(v)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", v, err, want)
		}
	}
	tr = newRoute(t, Settings{Expr: `empty`})
	if _, err := route(tr, &kgo.Record{Value: []byte(`{}`)}); err == nil || !strings.Contains(err.Error(), "has no result") {
		t.Errorf("no result: %v", err)
	}
}

func TestByHeader(t *testing.T) {
	tr := newRoute(t, Settings{Header: "destination"})
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "destination", Value: []byte("first")}, {Key: "x"}, {Key: "destination", Value: []byte("last")}}}
	if got, err := route(tr, r); err != nil || got != "last" {
		t.Errorf("got %q, %v; want the last destination header", got, err)
	}
	if _, err := route(tr, &kgo.Record{}); err == nil || !strings.Contains(err.Error(), `header "destination" is missing`) {
		t.Errorf("missing header: %v", err)
	}
	bad := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "destination", Value: []byte("a/b")}}}
	if _, err := route(tr, bad); err == nil || !strings.Contains(err.Error(), `is "a/b", not a topic name`) {
		t.Errorf("bad topic: %v", err)
	}
	// A topic seen before costs no allocation.
	out := make([]*kgo.Record, 0, 1)
	if n := testing.AllocsPerRun(100, func() { r.Topic = ""; _, _ = tr.Process(context.Background(), src, r, out[:0]) }); n != 0 {
		t.Errorf("routing by header allocates %v times per record", n)
	}
}

func TestDefault(t *testing.T) {
	tr := newRoute(t, Settings{Header: "destination", Default: "unrouted"})
	if got, err := route(tr, &kgo.Record{}); err != nil || got != "unrouted" {
		t.Errorf("missing header: %q, %v", got, err)
	}
	tr = newRoute(t, Settings{Expr: ".dest", Default: "unrouted"})
	for _, v := range []string{`{}`, `{"dest":3}`, `{"dest":"not valid"}`} {
		if got, err := route(tr, &kgo.Record{Value: []byte(v)}); err != nil || got != "unrouted" {
			t.Errorf("%s: %q, %v", v, got, err)
		}
	}
	// Broken values are errors even with a default.
	if _, err := route(tr, &kgo.Record{Value: []byte(`{`)}); err == nil {
		t.Error("a value that is not JSON should fail even with a default")
	}
}

func TestNoLoopBack(t *testing.T) {
	tr := newRoute(t, Settings{Expr: `.dest`})
	if _, err := route(tr, &kgo.Record{Value: []byte(`{"dest":"orders"}`)}); err == nil || !strings.Contains(err.Error(), "its own input topic") {
		t.Errorf("got %v", err)
	}
}

// Every bad setting is a one-line *settings.Error naming the
// setting; one naming another setting names it too.
func TestSettingErrors(t *testing.T) {
	for _, c := range []struct {
		s    map[string]string
		want string
	}{
		{map[string]string{}, "setting EXPR is not set: want a jq program whose first result is a topic name, e.g. \"orders-\" + .region; or set HEADER to route by a header"},
		{map[string]string{"EXPR": ".a", "HEADER": "h"}, `setting HEADER="h" is invalid: want unset while EXPR is set`},
		{map[string]string{"EXPR": ".a |"}, `setting EXPR=".a |" is invalid: want a jq program whose first result is a topic name, e.g. "orders-" + .region (unexpected EOF at offset 4)`},
		{map[string]string{"HEADER": "h", "DEFAULT": "no good"}, `setting DEFAULT="no good" is invalid: want a topic name`},
	} {
		_, err := transformtest.Build("route", c.s)
		var se *settings.Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: got %v, want a one-line *settings.Error containing %q", c.s, err, c.want)
		}
	}
}
