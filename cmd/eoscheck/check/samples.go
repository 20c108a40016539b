package check

import (
	"slices"
	"time"

	"github.com/streamproc/processor/record"
)

// checkHanging flags partitions whose last stable offset stayed at one
// offset below the high watermark for longer than timeout: the transaction
// starting there has been open that long.
func checkHanging(rp reporter, samples []Sample, timeout time.Duration) {
	if timeout <= 0 || len(samples) < 2 {
		return
	}
	tps := map[record.TopicPartition]bool{}
	for _, s := range samples {
		for tp := range s.Stable {
			tps[tp] = true
		}
	}
	for _, tp := range sortedKeys(tps) {
		w := longestStay(samples, func(s Sample) (int64, int64, bool) {
			st, ok1 := s.Stable[tp]
			hw, ok2 := s.High[tp]
			return st, hw, ok1 && ok2 && st < hw
		})
		if w.d > timeout {
			rp.add(Hanging, "%s: last stable offset stayed at %d below the high watermark %d for %s (transaction timeout %s)",
				tp, w.value, w.other, w.d.Round(time.Millisecond), timeout)
		}
	}
}

// checkStuck flags input partitions that had records to read past the
// committed offset while the committed offset did not move for longer than
// after. Offsets holding only transaction markers or aborted records are not
// lag: a caught-up group on a transactional input sits below the end.
func checkStuck(rp reporter, samples []Sample, tps []record.TopicPartition, inputs map[record.TopicPartition][]int64, after time.Duration) {
	if after <= 0 || len(samples) < 2 {
		return
	}
	for _, tp := range tps {
		offs := inputs[tp]
		w := longestStay(samples, func(s Sample) (int64, int64, bool) {
			end, ok := s.Stable[tp]
			c := committedAt(s.Committed, tp)
			i, _ := slices.BinarySearch(offs, c)
			return c, end, ok && i < len(offs) && offs[i] < end
		})
		if w.d > after {
			rp.add(Stuck, "%s: committed offset stayed at %d with records up to %d to read for %s (threshold %s)",
				tp, w.value, w.other, w.d.Round(time.Millisecond), after)
		}
	}
}

// stay is how long a value stayed the same, and another number taken with
// it at the end of that time.
type stay struct {
	d            time.Duration
	value, other int64
}

// longestStay returns the longest time, over samples in time order, that
// a value stayed the same while a condition held: of returns a sample's
// value, the other number to report, and whether the condition holds. A
// sample where it does not, or where the value changed, starts the time
// anew.
func longestStay(samples []Sample, of func(Sample) (value, other int64, holds bool)) stay {
	var start time.Time
	cur, in := int64(-1), false
	var worst stay
	for _, s := range samples {
		v, other, ok := of(s)
		if !ok {
			in = false
			continue
		}
		if !in || v != cur {
			in, start, cur = true, s.At, v
		}
		if d := s.At.Sub(start); d > worst.d {
			worst = stay{d: d, value: v, other: other}
		}
	}
	return worst
}

// inputPartitions returns every input partition the run knows of, sorted.
func inputPartitions(run Run) []record.TopicPartition {
	tps := map[record.TopicPartition]bool{}
	for tp := range run.InputEnds {
		tps[tp] = true
	}
	for tp := range run.Committed {
		tps[tp] = true
	}
	for _, in := range run.Inputs {
		tps[in.TP()] = true
	}
	return sortedKeys(tps)
}
