package metric

import (
	"math"
	"math/rand/v2"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// A tally's observations reach the histogram only when added, bucketed by
// inclusive upper bounds as a prometheus histogram does (a value on a
// bound counts in that bound's bucket), the largest past every bound in
// +Inf; Add empties the tally.
func TestBatchHistogram(t *testing.T) {
	h := NewBatchHistogram("test_seconds", "test", []float64{1, 2, 5})
	tl := h.NewTally()
	for _, v := range []float64{0, 1, 1.5, 2, 4, 9} {
		tl.Observe(v)
	}
	read := func() *dto.Histogram {
		var m dto.Metric
		if err := h.Metric().Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.Histogram
	}
	if n := read().GetSampleCount(); n != 0 {
		t.Fatalf("%d observations before Add, want 0", n)
	}
	h.Add(tl)
	h.Add(tl) // empty now: adds nothing
	got := read()
	want := map[float64]uint64{1: 2, 2: 4, 5: 5}
	for _, b := range got.Bucket {
		if b.GetCumulativeCount() != want[b.GetUpperBound()] {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[b.GetUpperBound()])
		}
	}
	if got.GetSampleCount() != 6 || got.GetSampleSum() != 17.5 {
		t.Errorf("count %d, sum %v; want 6, 17.5", got.GetSampleCount(), got.GetSampleSum())
	}
}

// A tally reuses the bucket of a value equal to the last one: its counts
// stay those of a search for every value, in runs of equal values, on the
// bounds and between them, with 0 and -0, past the last bound and NaN.
func TestTallyRunsMatchSearch(t *testing.T) {
	h := NewBatchHistogram("test_seconds", "test", []float64{0, 0.5, 1, 2, 5})
	tl := h.NewTally()
	want := make([]uint64, 6)
	vals := []float64{0, negZero, 0.25, 0.5, 0.75, 1, 2, 3, 5, 7, math.NaN()}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		v := vals[rng.IntN(len(vals))]
		for range rng.IntN(4) + 1 {
			tl.Observe(v)
			want[tl.bucket(v)]++
		}
	}
	for i := range want {
		if tl.counts[i] != want[i] {
			t.Errorf("bucket %d: %d, want %d", i, tl.counts[i], want[i])
		}
	}
}

var negZero = math.Copysign(0, -1)
