package metric

import (
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
