package statuspage

import (
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamproc/processor/pipeline"
)

// fill adds n samples a second apart ending at end, counters growing by
// in, out and commits a second, lag by lag.
func fill(h *history, n int, end time.Time, in, out, commits uint64, lag int64) {
	for i := range n {
		k := uint64(i)
		s := pipeline.Status{Consumed: in * k, Produced: out * k, Commits: commits * k, Lag: lag * int64(i),
			LagSeconds: float64(i) / 10, LatencyP50: 0.25, LatencyP99: 1.5 + float64(i)/100,
			Aborts: map[string]uint64{"rebalance": k / 2, "injected": k / 2}}
		h.add(s, end.Add(-time.Duration(n-1-i)*time.Second))
	}
}

// The ring keeps its window's worth of samples, the newest, in order; the
// rates are the counters' growth per second; since cuts the window.
func TestHistoryRing(t *testing.T) {
	h := newHistory(nil, 10*time.Second, time.Second)
	if ss := h.samples(time.Time{}); len(ss) != 0 {
		t.Fatalf("an empty history has %d samples", len(ss))
	}
	if _, ok := h.current(); ok {
		t.Error("current with no samples")
	}
	end := time.Now()
	fill(h, 25, end, 100, 40, 2, 0)
	ss := h.samples(time.Time{})
	if len(ss) != 10 {
		t.Fatalf("%d samples, want 10 (the window)", len(ss))
	}
	for i, s := range ss {
		if want := end.Add(-time.Duration(9-i) * time.Second); !s.At.Equal(want) {
			t.Errorf("sample %d at %s, want %s", i, s.At, want)
		}
		if s.InPerSec != 100 || s.OutPerSec != 40 || s.CommitsPerSec != 2 {
			t.Errorf("sample %d rates %v %v %v", i, s.InPerSec, s.OutPerSec, s.CommitsPerSec)
		}
	}
	if last := ss[9]; last.Consumed != 2400 || last.Aborts != 24 {
		t.Errorf("last sample %+v", last)
	}
	cur, ok := h.current()
	if !ok || cur.InPerSec != 100 || cur.CommitsPerSec != 2 || !cur.At.Equal(end) {
		t.Errorf("current %+v %v", cur, ok)
	}
	if n := len(h.samples(end.Add(-3 * time.Second))); n != 4 {
		t.Errorf("since 3s before the last: %d samples, want 4", n)
	}
	if n := len(h.samples(end.Add(time.Second))); n != 0 {
		t.Errorf("since after the last: %d samples", n)
	}
}

// A counter that goes back counts as no change, and two samples at the
// same moment have no rate.
func TestHistoryRates(t *testing.T) {
	a := Sample{At: time.Unix(100, 0), Consumed: 50, Produced: 10}
	b := Sample{At: time.Unix(102, 0), Consumed: 40, Produced: 30, Commits: 4}
	in, out, c, ab := rates(a, b)
	if in != 0 || out != 10 || c != 2 || ab != 0 {
		t.Errorf("rates %v %v %v %v", in, out, c, ab)
	}
	if in, _, _, _ := rates(b, b); in != 0 {
		t.Errorf("same moment: %v", in)
	}
}

// The sampler's goroutine samples at once and then every interval, and
// stops with its context.
func TestHistoryRun(t *testing.T) {
	var n atomic.Uint64
	h := newHistory(func() pipeline.Status { return pipeline.Status{Commits: n.Add(1)} }, time.Minute, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(h.samples(time.Time{})) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if ss := h.samples(time.Time{}); len(ss) < 3 || ss[0].Commits != 1 {
		t.Errorf("samples %+v", ss)
	}
}

// Lag is growing when it rose over the last minute, at its middle too; a
// high lag that is steady or shrinking is not growing.
func TestLagGrowing(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		lag  int64
		want bool
	}{
		{"growing for two minutes", 120, 5, true},
		{"growing for less than a minute", 40, 5, false},
		{"steady", 120, 0, false},
		{"shrinking", 120, -5, false},
	} {
		h := newHistory(nil, time.Hour, time.Second)
		fill(h, c.n, time.Now(), 1, 1, 1, c.lag)
		ss := h.samples(time.Time{})
		if c.lag < 0 {
			for i := range ss {
				ss[i].Lag += 10000
			}
		}
		if got := lagGrowing(ss); got != c.want {
			t.Errorf("%s: lagGrowing = %v, want %v", c.name, got, c.want)
		}
	}
}

var polyline = regexp.MustCompile(`<polyline class="series" data-series="([^"]+)" data-last="([^"]+)" data-last-at="([^"]+)"[^>]*points="([^"]*)"`)

// A chart's last point is the last sample: at the plot's right edge, at
// the height of its value, and so says data-last; no more than
// chartPoints points.
func TestChartLastPoint(t *testing.T) {
	h := newHistory(nil, time.Hour, time.Second)
	end := time.Now()
	fill(h, 1000, end, 100, 40, 2, 3)
	ss := h.samples(time.Time{})
	svg := string(pageCharts(ss, false)[4]) // latency
	m := polyline.FindAllStringSubmatch(svg, -1)
	if len(m) != 2 {
		t.Fatalf("%d polylines in %s", len(m), svg[:200])
	}
	top, err := strconv.ParseFloat(regexp.MustCompile(`data-max="([^"]+)"`).FindStringSubmatch(svg)[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	last := ss[len(ss)-1]
	for _, l := range m {
		want := map[string]float64{"p50": last.LatencyP50, "p99": last.LatencyP99}[l[1]]
		if l[2] != num(want) || l[3] != last.At.UTC().Format(time.RFC3339Nano) {
			t.Errorf("%s: data-last %s at %s, want %s at %s", l[1], l[2], l[3], num(want), last.At.UTC().Format(time.RFC3339Nano))
		}
		pts := strings.Fields(l[4])
		if len(pts) > chartPoints || len(pts) < chartPoints/2 {
			t.Errorf("%s: %d points", l[1], len(pts))
		}
		var x, y float64
		if _, err := fmt.Sscanf(pts[len(pts)-1], "%g,%g", &x, &y); err != nil {
			t.Fatal(err)
		}
		if x != chartW-chartPadR {
			t.Errorf("%s: last point at x %v, want the right edge %d", l[1], x, chartW-chartPadR)
		}
		if v := chartValue(y, top); v < want-top/200 || v > want+top/200 {
			t.Errorf("%s: last point at y %v is %v, want %v", l[1], y, v, want)
		}
	}
	if empty := string(chart("c", "t", "u", nil, series{"a", "#000", func(Sample) float64 { return 1 }, ""})); !strings.Contains(empty, "no samples yet") {
		t.Errorf("empty chart %s", empty)
	}
}

// With 1,000 partitions and a full history the page stays small: the 20
// partitions with the most lag, a summary, a link to all of them.
func TestStatusPageSize(t *testing.T) {
	s := pipeline.Status{Ready: true, Health: "ok", Aborts: map[string]uint64{}}
	for i := range 1000 {
		lag := int64((i * 7919) % 1000)
		s.Partitions = append(s.Partitions, pipeline.PartitionStatus{Topic: "orders", Partition: int32(i),
			Position: 1_000_000, Committed: 1_000_000 - lag, LogEnd: 1_000_000, LastStable: 1_000_000, Lag: lag, LagSeconds: float64(lag) / 100})
		s.Lag += lag
	}
	hist := newHistory(nil, defaultHistory, sampleEvery)
	fill(hist, 2000, time.Now(), 12345, 12345, 10, 7)
	h := &statusHandlers{snapshot: func() pipeline.Status { return s }, hist: hist, info: Info{StartedAt: time.Now()}}
	rec := httptest.NewRecorder()
	h.page(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	if len(body) > 200_000 {
		t.Errorf("the page is %d bytes with 1,000 partitions, want at most 200 KB", len(body))
	}
	if n := strings.Count(body, `<tr><td class="l">orders</td>`); n != pageRows {
		t.Errorf("%d partition rows, want %d", n, pageRows)
	}
	for _, want := range []string{"1000 partitions, 999 with lag", `href="/?partitions=all"`, `<td>1000000</td><td>999</td><td>9.99</td><td>0</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	lags := regexp.MustCompile(`<td>(\d+)</td><td>[0-9.e+]+</td><td>0</td></tr>`).FindAllStringSubmatch(body, -1)
	for i := 1; i < len(lags); i++ {
		a, _ := strconv.Atoi(lags[i-1][1])
		b, _ := strconv.Atoi(lags[i][1])
		if a < b {
			t.Errorf("row %d has lag %d, row %d more (%d): not most lag first", i, a, i+1, b)
		}
	}
	if len(lags) != pageRows {
		t.Errorf("%d lags read, want %d", len(lags), pageRows)
	}
	t.Logf("page: %d bytes", len(body))
	rec = httptest.NewRecorder()
	h.page(rec, httptest.NewRequest("GET", "/?partitions=all", nil))
	if n := strings.Count(rec.Body.String(), `<tr><td class="l">orders</td>`); n != 1000 {
		t.Errorf("?partitions=all: %d rows, want 1000", n)
	}
}
