package check

import (
	"slices"
	"time"
)

// checkHanging flags partitions whose last stable offset stayed at one
// offset below the high watermark for longer than timeout: the transaction
// starting there has been open that long.
func checkHanging(rp reporter, samples []Sample, timeout time.Duration) {
	if timeout <= 0 || len(samples) < 2 {
		return
	}
	tps := map[TopicPartition]bool{}
	for _, s := range samples {
		for tp := range s.Stable {
			tps[tp] = true
		}
	}
	for _, tp := range sortedKeys(tps) {
		var start time.Time
		lso, open := int64(-1), false
		var worst time.Duration
		var worstLSO, worstHWM int64
		for _, s := range samples {
			st, ok1 := s.Stable[tp]
			hw, ok2 := s.High[tp]
			if !ok1 || !ok2 || st >= hw {
				open = false
				continue
			}
			if !open || st != lso {
				open, start, lso = true, s.At, st
			}
			if d := s.At.Sub(start); d > worst {
				worst, worstLSO, worstHWM = d, st, hw
			}
		}
		if worst > timeout {
			rp.add(Hanging, "%s: last stable offset stayed at %d below the high watermark %d for %s (transaction timeout %s)",
				tp, worstLSO, worstHWM, worst.Round(time.Millisecond), timeout)
		}
	}
}

// checkStuck flags input partitions that had records to read past the
// committed offset while the committed offset did not move for longer than
// after. Offsets holding only transaction markers or aborted records are not
// lag: a caught-up group on a transactional input sits below the end.
func checkStuck(rp reporter, samples []Sample, tps []TopicPartition, inputs map[TopicPartition][]int64, after time.Duration) {
	if after <= 0 || len(samples) < 2 {
		return
	}
	for _, tp := range tps {
		offs := inputs[tp]
		var start time.Time
		at, lagging := int64(-1), false
		var worst time.Duration
		var worstAt, worstEnd int64
		for _, s := range samples {
			end, ok := s.Stable[tp]
			c := committedAt(s.Committed, tp)
			i, _ := slices.BinarySearch(offs, c)
			if !ok || i >= len(offs) || offs[i] >= end {
				lagging = false
				continue
			}
			if !lagging || c != at {
				lagging, start, at = true, s.At, c
			}
			if d := s.At.Sub(start); d > worst {
				worst, worstAt, worstEnd = d, c, end
			}
		}
		if worst > after {
			rp.add(Stuck, "%s: committed offset stayed at %d with records up to %d to read for %s (threshold %s)",
				tp, worstAt, worstEnd, worst.Round(time.Millisecond), after)
		}
	}
}

// inputPartitions returns every input partition the run knows of, sorted.
func inputPartitions(run Run) []TopicPartition {
	tps := map[TopicPartition]bool{}
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
