package pipeline

import (
	"slices"
	"sync"
	"time"

	"github.com/streamproc/processor/internal/metric"
)

// End-to-end latency: each input record's timestamp goes into the open
// transaction's stamps (a reused slice: one append per record, no lock,
// no allocation once it has grown), and a commit observes them all in
// processor_end_to_end_latency_seconds, against the moment the session's
// End returned committed (for PostgreSQL, the database commit). An abort
// drops them: the retry's commit observes its records once. Inputs the
// chain filtered, the policy skipped or dead-lettered are committed
// inputs too and are observed. A timestamp of 0 or below (a producer that
// set none) is not observed; one in the future (clock skew) counts as 0.

// latencyWindowSize is how many observations latencyWindow keeps, and
// latencySamplesPerTxn how many of one transaction's records it takes.
const (
	latencyWindowSize    = 16384
	latencySamplesPerTxn = 128
)

// LatencyWindow is the span Status' latency quantiles cover.
const LatencyWindow = 10 * time.Second

// latencyWindow keeps recent latencies for Status' quantiles: per
// committed transaction up to latencySamplesPerTxn of its records, evenly
// spaced, each weighted by the records it stands for, so that the
// quantiles are unbiased between small and large transactions. The loop
// adds once per commit; Status reads. The lock is taken once per commit,
// never per record.
type latencyWindow struct {
	// tally counts a commit's observations before they are added to
	// the histogram; the loop's goroutine only.
	tally *metric.Tally

	mu   sync.Mutex
	at   []int64   // when the sample's transaction committed, Unix ms
	lat  []float64 // seconds
	w    []float64 // records it stands for
	next int
}

func newLatencyWindow(h *metric.BatchHistogram) *latencyWindow {
	return &latencyWindow{tally: h.NewTally(), at: make([]int64, latencyWindowSize), lat: make([]float64, latencyWindowSize), w: make([]float64, latencyWindowSize)}
}

// latencyOf is the latency of a record with timestamp ts (Unix ms)
// committed at now, and whether it is observed at all.
func latencyOf(now, ts int64) (float64, bool) {
	if ts <= 0 {
		return 0, false
	}
	return float64(max(now-ts, 0)) / 1000, true
}

// observeCommitted observes the committed transaction's stamps at now
// (Unix ms): every one in the histogram, a sample of them in the window.
func (p *Pipeline) observeCommitted(now int64) {
	stamps := p.open.stamps
	t := p.latency.tally
	for _, ts := range stamps {
		if l, ok := latencyOf(now, ts); ok {
			t.Observe(l)
		}
	}
	p.o.Metrics.EndToEndLatency.Add(t)
	p.latency.add(now, stamps)
}

// add takes a sample of one transaction's stamps, committed at now.
func (lw *latencyWindow) add(now int64, stamps []int64) {
	if len(stamps) == 0 {
		return
	}
	stride := (len(stamps) + latencySamplesPerTxn - 1) / latencySamplesPerTxn
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for i := 0; i < len(stamps); i += stride {
		l, ok := latencyOf(now, stamps[i])
		if !ok {
			continue
		}
		n := min(stride, len(stamps)-i)
		lw.at[lw.next], lw.lat[lw.next], lw.w[lw.next] = now, l, float64(n)
		lw.next = (lw.next + 1) % len(lw.at)
	}
}

// quantiles returns the latency quantiles qs of the samples committed
// since now minus LatencyWindow, 0s when there are none.
func (lw *latencyWindow) quantiles(now time.Time, qs ...float64) []float64 {
	from := now.Add(-LatencyWindow).UnixMilli()
	type sample struct{ lat, w float64 }
	var ss []sample
	var total float64
	lw.mu.Lock()
	for i, at := range lw.at {
		if at >= from && lw.w[i] > 0 {
			ss = append(ss, sample{lw.lat[i], lw.w[i]})
			total += lw.w[i]
		}
	}
	lw.mu.Unlock()
	out := make([]float64, len(qs))
	if total == 0 {
		return out
	}
	slices.SortFunc(ss, func(a, b sample) int {
		switch {
		case a.lat < b.lat:
			return -1
		case a.lat > b.lat:
			return 1
		}
		return 0
	})
	for qi, q := range qs {
		want, seen := q*total, 0.0
		out[qi] = ss[len(ss)-1].lat
		for _, s := range ss {
			if seen += s.w; seen >= want {
				out[qi] = s.lat
				break
			}
		}
	}
	return out
}
