package aggregate

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/memstore"
)

func run(t *testing.T, s *Settings, recs ...*kgo.Record) []string {
	t.Helper()
	if s.Store == "" {
		s.Store = "aggregate"
	}
	tr, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := memstore.Stores{}.Context(context.Background())
	var got []string
	for _, r := range recs {
		out, err := tr.Process(ctx, transform.Source{}, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			got = append(got, string(o.Key)+" "+string(o.Value))
		}
	}
	return got
}

func rec(key, value string, ts time.Time) *kgo.Record {
	return &kgo.Record{Key: []byte(key), Value: []byte(value), Timestamp: ts}
}

func check(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("output %d: got %s, want %s", i, got[i], want[i])
		}
	}
}

func TestCountByRecordKey(t *testing.T) {
	now := time.Unix(1000, 0)
	got := run(t, &Settings{Function: "count"}, rec("a", "{}", now), rec("b", "{}", now), rec("a", "{}", now))
	check(t, got, []string{`a {"key":"a","value":1}`, `b {"key":"b","value":1}`, `a {"key":"a","value":2}`})
}

func TestSumIsExact(t *testing.T) {
	now := time.Unix(1000, 0)
	got := run(t, &Settings{Function: "sum", Field: ".n", By: ".c"},
		rec("", `{"c":"x","n":9007199254740993}`, now), rec("", `{"c":"x","n":1}`, now), rec("", `{"c":"x","n":0.1}`, now), rec("", `{"c":"x","n":0.2}`, now))
	check(t, got, []string{`x {"key":"x","value":9007199254740993}`, `x {"key":"x","value":9007199254740994}`,
		`x {"key":"x","value":9007199254740994.1}`, `x {"key":"x","value":9007199254740994.3}`})
}

func TestMinMaxByNumber(t *testing.T) {
	now := time.Unix(1000, 0)
	got := run(t, &Settings{Function: "max", Field: ".n", By: ".c"}, rec("", `{"c":7,"n":3}`, now), rec("", `{"c":7,"n":2}`, now))
	check(t, got, []string{`7 {"key":7,"value":3}`, `7 {"key":7,"value":3}`})
	got = run(t, &Settings{Function: "min", Field: ".n"}, rec("k", `{"n":3}`, now), rec("k", `{"n":-2}`, now))
	check(t, got, []string{`k {"key":"k","value":3}`, `k {"key":"k","value":-2}`})
}

func TestTumblingWindows(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := run(t, &Settings{Function: "count", Window: time.Minute},
		rec("a", "{}", base.Add(10*time.Second)), rec("a", "{}", base.Add(59*time.Second)), rec("a", "{}", base.Add(61*time.Second)))
	check(t, got, []string{
		`a {"key":"a","value":1,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00Z"}`,
		`a {"key":"a","value":2,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00Z"}`,
		`a {"key":"a","value":1,"window_start":"2026-01-01T00:01:00Z","window_end":"2026-01-01T00:02:00Z"}`,
	})
}

func TestRefusesBadSettings(t *testing.T) {
	for _, s := range []Settings{{Function: "avg", Store: "s"}, {Function: "sum", Store: "s"}, {Function: "count", By: ".[", Store: "s"}} {
		if _, err := New(&s); err == nil {
			t.Errorf("%+v: accepted", s)
		}
	}
}

func TestWithoutStoresFails(t *testing.T) {
	tr, _ := New(&Settings{Function: "count", Store: "s"})
	if _, err := tr.Process(context.Background(), transform.Source{}, rec("a", "{}", time.Now()), nil); err == nil {
		t.Error("ran without stores")
	}
}
