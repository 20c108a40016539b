package metric

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// BatchHistogram is a histogram processor_<name> that takes its
// observations in batches: a Tally, owned by one goroutine, counts them
// without atomics or locks, and Add publishes a whole tally at once (one
// lock, one addition per bucket). It suits observations made for many
// records at one moment, such as a transaction's commit. It collects as
// a prometheus histogram with the given buckets.
type BatchHistogram struct {
	desc  *prometheus.Desc
	upper []float64

	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
}

// NewBatchHistogram returns the histogram processor_<name> with buckets
// (upper bounds, ascending).
func NewBatchHistogram(name, help string, buckets []float64) *BatchHistogram {
	return &BatchHistogram{
		desc:   prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, nil, nil),
		upper:  buckets,
		counts: make([]uint64, len(buckets)+1),
	}
}

// Tally is a batch of observations not yet added to its histogram.
type Tally struct {
	upper  []float64
	counts []uint64
	sum    float64
	n      int
	// last is the last value observed and at its bucket: the records of
	// one commit often share a timestamp, and so a latency.
	last    float64
	at      int
	hasLast bool
}

// NewTally returns an empty tally for h.
func (h *BatchHistogram) NewTally() *Tally {
	return &Tally{upper: h.upper, counts: make([]uint64, len(h.upper)+1)}
}

// Observe counts v in the tally.
func (t *Tally) Observe(v float64) {
	if !t.hasLast || v != t.last {
		t.last, t.at, t.hasLast = v, t.bucket(v), true
	}
	t.counts[t.at]++
	t.sum += v
	t.n++
}

// bucket is the index of the first bucket whose upper bound is >= v.
func (t *Tally) bucket(v float64) int {
	lo, hi := 0, len(t.upper)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if t.upper[mid] < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Add publishes t's observations in h and empties t.
func (h *BatchHistogram) Add(t *Tally) {
	if t.n == 0 {
		return
	}
	h.mu.Lock()
	for i, c := range t.counts {
		h.counts[i] += c
	}
	h.sum += t.sum
	h.mu.Unlock()
	clear(t.counts)
	t.sum, t.n = 0, 0
}

// Describe implements prometheus.Collector.
func (h *BatchHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect implements prometheus.Collector.
func (h *BatchHistogram) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	buckets := make(map[float64]uint64, len(h.upper))
	var n uint64
	for i, ub := range h.upper {
		n += h.counts[i]
		buckets[ub] = n
	}
	n += h.counts[len(h.upper)]
	sum := h.sum
	h.mu.Unlock()
	ch <- prometheus.MustNewConstHistogram(h.desc, n, sum, buckets)
}

// Metric returns what h collects, as one metric.
func (h *BatchHistogram) Metric() prometheus.Metric {
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	return <-ch
}
