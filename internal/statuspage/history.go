package statuspage

import (
	"context"
	"sync"
	"time"

	"github.com/streamproc/processor/pipeline"
)

// The status history: one goroutine samples the pipeline's counters every
// second into a bounded ring, and /status and the page read their rates
// and charts from it, so that every reader sees the same figures however
// many of them there are and however often they look.

// defaultHistory is how far back the history reaches unless told.
const defaultHistory = 15 * time.Minute

// sampleEvery is how often the sampler samples.
const sampleEvery = time.Second

// rateWindow is the span the current rates of /status and the page are
// taken over.
const rateWindow = 10 * time.Second

// Sample is the processor at one moment, in /status's history. The rates
// are over the time since the sample before (0 in the first sample).
type Sample struct {
	At         time.Time `json:"at"`
	Consumed   uint64    `json:"records_consumed"`
	Produced   uint64    `json:"records_produced"`
	Commits    uint64    `json:"commits"`
	Aborts     uint64    `json:"aborts"` // all reasons
	Lag        int64     `json:"lag"`
	LagSeconds float64   `json:"lag_seconds"`
	LatencyP50 float64   `json:"latency_p50_seconds"`
	LatencyP99 float64   `json:"latency_p99_seconds"`

	InPerSec      float64 `json:"records_in_per_second"`
	OutPerSec     float64 `json:"records_out_per_second"`
	CommitsPerSec float64 `json:"commits_per_second"`
	AbortsPerSec  float64 `json:"aborts_per_second"`
}

// history is the ring of samples. Safe for concurrent use.
type history struct {
	snapshot func() pipeline.Status
	every    time.Duration

	mu   sync.Mutex
	ring []Sample // len is the capacity; ring[next] is the oldest once full
	next int
	full bool
}

// newHistory returns a history of snapshot's samples every every, keeping
// window's worth of them (at least two). A window of 0 means
// defaultHistory; so does an every of 0 sampleEvery.
func newHistory(snapshot func() pipeline.Status, window, every time.Duration) *history {
	if window <= 0 {
		window = defaultHistory
	}
	if every <= 0 {
		every = sampleEvery
	}
	n := max(int(window/every), 2)
	return &history{snapshot: snapshot, every: every, ring: make([]Sample, n)}
}

// run samples until ctx ends, the first sample at once.
func (h *history) run(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		h.add(h.snapshot(), time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// add records s as the sample at at, with the rates since the one before.
func (h *history) add(s pipeline.Status, at time.Time) {
	cur := Sample{At: at, Consumed: s.Consumed, Produced: s.Produced, Commits: s.Commits, Lag: s.Lag,
		LagSeconds: s.LagSeconds, LatencyP50: s.LatencyP50, LatencyP99: s.LatencyP99}
	for _, n := range s.Aborts {
		cur.Aborts += n
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if prev, ok := h.lastLocked(); ok {
		cur.InPerSec, cur.OutPerSec, cur.CommitsPerSec, cur.AbortsPerSec = rates(prev, cur)
	}
	h.ring[h.next] = cur
	h.next++
	if h.next == len(h.ring) {
		h.next, h.full = 0, true
	}
}

// rates are the per-second rates of records in and out, commits and
// aborts from a to b; 0 when b is not later than a. A counter that went
// back (it does not, but a restarted source might) counts as no change.
func rates(a, b Sample) (in, out, commits, aborts float64) {
	secs := b.At.Sub(a.At).Seconds()
	if secs <= 0 {
		return 0, 0, 0, 0
	}
	r := func(x, y uint64) float64 { return float64(y-min(x, y)) / secs }
	return r(a.Consumed, b.Consumed), r(a.Produced, b.Produced), r(a.Commits, b.Commits), r(a.Aborts, b.Aborts)
}

func (h *history) lastLocked() (Sample, bool) {
	if !h.full && h.next == 0 {
		return Sample{}, false
	}
	return h.ring[(h.next+len(h.ring)-1)%len(h.ring)], true
}

// samples returns the samples taken at since or later, oldest first; a
// zero since returns them all.
func (h *history) samples(since time.Time) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all []Sample
	if h.full {
		all = append(all, h.ring[h.next:]...)
	}
	all = append(all, h.ring[:h.next]...)
	for i, s := range all {
		if !s.At.Before(since) {
			return all[i:]
		}
	}
	return nil
}

// current is the latest sample with the rates over the last rateWindow
// (or as much of it as the history holds), and false before the second
// sample.
func (h *history) current() (Sample, bool) {
	h.mu.Lock()
	last, ok := h.lastLocked()
	h.mu.Unlock()
	if !ok {
		return Sample{}, false
	}
	ss := h.samples(last.At.Add(-rateWindow))
	if len(ss) < 2 {
		return last, false
	}
	last.InPerSec, last.OutPerSec, last.CommitsPerSec, last.AbortsPerSec = rates(ss[0], last)
	return last, true
}

// lagGrowing reports whether the total lag has been growing for the last
// minute: the lag now is above the lag half a minute ago, which is above
// the lag a minute ago. A history shorter than a minute is not growing.
func lagGrowing(ss []Sample) bool {
	if len(ss) < 2 {
		return false
	}
	now := ss[len(ss)-1]
	at := func(ago time.Duration) (Sample, bool) {
		t := now.At.Add(-ago)
		for i := len(ss) - 1; i >= 0; i-- {
			if !ss[i].At.After(t) {
				return ss[i], true
			}
		}
		return Sample{}, false
	}
	minute, ok1 := at(time.Minute)
	half, ok2 := at(30 * time.Second)
	return ok1 && ok2 && now.Lag > half.Lag && half.Lag > minute.Lag
}
