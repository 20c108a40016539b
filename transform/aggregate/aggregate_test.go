package aggregate

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
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
		out, err := tr.Process(ctx, record.Source{}, r, nil)
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
		`a@1767225600000 {"key":"a","value":1,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00Z"}`,
		`a@1767225600000 {"key":"a","value":2,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00Z"}`,
		`a@1767225660000 {"key":"a","value":1,"window_start":"2026-01-01T00:01:00Z","window_end":"2026-01-01T00:02:00Z"}`,
	})
}

// timedStores are stores in memory that give the stream time as the
// processor does (the running maximum of the records' timestamps, in
// the order run passes them) and keep the late records' notes.
type timedStores struct {
	memstore.Stores
	ms   int64
	late []transform.LateInfo
}

func (s *timedStores) StreamTime() (int64, bool) { return s.ms, true }

func (s *timedStores) Late(_ *kgo.Record, info transform.LateInfo) bool {
	s.late = append(s.late, info)
	return false
}

// runTimed is run with stream time; it returns the outputs and the
// late records' notes.
func runTimed(t *testing.T, s *Settings, recs ...*kgo.Record) ([]string, []transform.LateInfo) {
	t.Helper()
	s.Store = "aggregate"
	tr, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	st := &timedStores{Stores: memstore.Stores{}}
	ctx := transform.WithStores(context.Background(), st)
	var got []string
	for _, r := range recs {
		st.ms = max(st.ms, r.Timestamp.UnixMilli())
		out, err := tr.Process(ctx, record.Source{}, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			got = append(got, string(o.Key)+" "+string(o.Value))
		}
	}
	return got, st.late
}

// A record counts in its window while the stream time is before the
// window's end plus the grace; after, it is late: handed to the
// processor, not counted, and never starts the window again.
func TestGraceAndLate(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, late := runTimed(t, &Settings{Function: "count", Window: time.Minute, Grace: 30 * time.Second},
		rec("a", "{}", base.Add(10*time.Second)),
		rec("a", "{}", base.Add(80*time.Second)), // stream 1:20: window 0 open until 1:30
		rec("a", "{}", base.Add(20*time.Second)), // counts: 2 in window 0
		rec("a", "{}", base.Add(95*time.Second)), // stream 1:35: window 0 closed
		rec("a", "{}", base.Add(50*time.Second)), // late by 5s
	)
	check(t, got, []string{
		`a@1767225600000 {"key":"a","value":1,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00Z"}`,
		`a@1767225660000 {"key":"a","value":1,"window_start":"2026-01-01T00:01:00Z","window_end":"2026-01-01T00:02:00Z"}`,
		`a@1767225600000 {"key":"a","value":2,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00Z"}`,
		`a@1767225660000 {"key":"a","value":2,"window_start":"2026-01-01T00:01:00Z","window_end":"2026-01-01T00:02:00Z"}`,
	})
	want := transform.LateInfo{Store: "aggregate", StreamTime: base.Add(95 * time.Second).UnixMilli(), By: 5000,
		WindowStart: base.UnixMilli(), WindowEnd: base.Add(time.Minute).UnixMilli(), Windowed: true}
	if len(late) != 1 || late[0] != want {
		t.Errorf("late %+v, want %+v", late, want)
	}
}

// Hopping windows: a record counts in every window it falls in, oldest
// first, and only in those still open.
func TestHoppingWindows(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, late := runTimed(t, &Settings{Function: "count", Window: time.Minute, Advance: 20 * time.Second},
		rec("a", "{}", base.Add(50*time.Second)),
		rec("a", "{}", base.Add(65*time.Second)), // stream 1:05: [0:00, 1:00) closed
		rec("a", "{}", base.Add(45*time.Second)), // in [0:00,1:00) closed, [0:20,1:20) and [0:40,1:40) open
	)
	check(t, got, []string{
		`a@1767225600000 {"key":"a","value":1,"window_start":"2026-01-01T00:00:00Z","window_end":"2026-01-01T00:01:00Z"}`,
		`a@1767225620000 {"key":"a","value":1,"window_start":"2026-01-01T00:00:20Z","window_end":"2026-01-01T00:01:20Z"}`,
		`a@1767225640000 {"key":"a","value":1,"window_start":"2026-01-01T00:00:40Z","window_end":"2026-01-01T00:01:40Z"}`,
		`a@1767225620000 {"key":"a","value":2,"window_start":"2026-01-01T00:00:20Z","window_end":"2026-01-01T00:01:20Z"}`,
		`a@1767225640000 {"key":"a","value":2,"window_start":"2026-01-01T00:00:40Z","window_end":"2026-01-01T00:01:40Z"}`,
		`a@1767225660000 {"key":"a","value":1,"window_start":"2026-01-01T00:01:00Z","window_end":"2026-01-01T00:02:00Z"}`,
		`a@1767225620000 {"key":"a","value":3,"window_start":"2026-01-01T00:00:20Z","window_end":"2026-01-01T00:01:20Z"}`,
		`a@1767225640000 {"key":"a","value":3,"window_start":"2026-01-01T00:00:40Z","window_end":"2026-01-01T00:01:40Z"}`,
	})
	if len(late) != 0 {
		t.Errorf("late %+v: a record with an open window is not late", late)
	}
}

// floorTo against a reference over negative and positive values.
func TestFloorTo(t *testing.T) {
	for x := int64(-50); x <= 50; x++ {
		for _, step := range []int64{1, 3, 7, 20} {
			want := x - ((x%step)+step)%step
			if got := floorTo(x, step); got != want {
				t.Fatalf("floorTo(%d, %d) = %d, want %d", x, step, got, want)
			}
		}
	}
}

func TestRefusesBadSettings(t *testing.T) {
	for _, s := range []Settings{{Function: "avg", Store: "s"}, {Function: "sum", Store: "s"}, {Function: "count", By: ".[", Store: "s"},
		{Function: "count", Store: "s", Advance: time.Minute}, {Function: "count", Store: "s", Window: time.Minute, Advance: 2 * time.Minute},
		{Function: "count", Store: "s", Window: time.Hour, Advance: time.Millisecond}, {Function: "count", Store: "s", Window: time.Minute, Grace: -1}} {
		if _, err := New(&s); err == nil {
			t.Errorf("%+v: accepted", s)
		}
	}
}

func TestWithoutStoresFails(t *testing.T) {
	tr, _ := New(&Settings{Function: "count", Store: "s"})
	if _, err := tr.Process(context.Background(), record.Source{}, rec("a", "{}", time.Now()), nil); err == nil {
		t.Error("ran without stores")
	}
}
