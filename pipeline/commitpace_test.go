package pipeline

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// A destination whose commit time grows with the batch (perRecord for each
// record, plus overhead): the loop's sizing (pace.grow after a commit,
// pace.outOfTime after an end cut short at the timeout) must drain any
// backlog, with few ends cut short, whatever the cost per record, as long
// as one record alone commits within the timeout; the ends cut short in a
// row are as many as it takes to quarter the bound down to what fits. The
// simulation takes
// each transaction as full as the bound allows (a backlog).
func TestPaceDrainsSlowCommits(t *testing.T) {
	const limit = 100_000
	check := func(t *testing.T, perRecord, overhead, timeout time.Duration, backlog int) {
		t.Helper()
		pc := pace{max: limit}
		target := timeout / 4
		left, cut, ends, cutRun := backlog, 0, 0, 0
		for left > 0 {
			ends++
			if ends > 10_000 {
				t.Fatalf("per record %s, timeout %s: %d of %d records left after %d ends (%d cut short); bound %d",
					perRecord, timeout, left, backlog, ends, cut, pc.max)
			}
			n := min(pc.max, left)
			took := overhead + time.Duration(n)*perRecord
			if took >= timeout { // the deadline cuts it: nothing commits
				cut++
				cutRun++
				// Each cut quarters the bound at least: as many cuts as
				// it takes quarters to come down from the limit, and
				// then one more for the noise of the first fit.
				if maxRun := 2 + int(math.Ceil(math.Log(float64(limit)*float64(perRecord)/float64(timeout))/math.Log(4))); cutRun > maxRun {
					t.Fatalf("per record %s, timeout %s: %d ends in a row cut short at %d records, want at most %d", perRecord, timeout, cutRun, n, maxRun)
				}
				pc.outOfTime(n, timeout, target)
				continue
			}
			cutRun = 0
			left -= n
			pc.grow(limit, n, took, target)
			if pc.max < 1 || pc.max > limit {
				t.Fatalf("bound %d out of [1, %d]", pc.max, limit)
			}
		}
		// Once sized, batches commit in about target: at most twice it.
		if n := min(pc.max, limit); overhead+time.Duration(n)*perRecord > 2*target+overhead && pc.max < limit {
			t.Errorf("per record %s: final bound %d commits in %s, over twice the target %s",
				perRecord, pc.max, time.Duration(n)*perRecord, target)
		}
		t.Logf("per record %s, timeout %s: %d records in %d ends, %d cut short, final bound %d", perRecord, timeout, backlog, ends, cut, pc.max)
	}
	// The case of the issue: 0.3 ms a row, a 5 s timeout, 40,000 rows
	// (the same batch, retried whole, never committed before).
	check(t, 300*time.Microsecond, 2*time.Millisecond, 5*time.Second, 40_000)
	// Kafka-like: commits are quick, the bound stays at the limit.
	pc := pace{max: limit}
	pc.grow(limit, limit, 30*time.Millisecond, 10*time.Second)
	if pc.max != limit {
		t.Errorf("a quick commit of %d records set the bound to %d", limit, pc.max)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		timeout := time.Duration(1+r.IntN(60)) * time.Second
		perRecord := time.Duration(r.Int64N(int64(timeout) / 2)) // one record commits in time
		perRecord = time.Duration(float64(perRecord) * r.Float64() / float64(1+r.IntN(10_000)))
		check(t, perRecord, time.Duration(r.IntN(5))*time.Millisecond, timeout, 1+r.IntN(500_000))
	}
}

// A commit that got slower than half the target shrinks the bound to what
// ends in target; a quick one doubles it back, up to the limit.
func TestPaceGrowShrinks(t *testing.T) {
	pc := pace{max: 1000}
	pc.grow(100_000, 1000, 4*time.Second, 2*time.Second) // 2 ms a record: 1000 end in 2 s
	if pc.max != 500 {
		t.Errorf("after 1000 records in 4s with target 2s: bound %d, want 500", pc.max)
	}
	pc.grow(100_000, 500, 10*time.Millisecond, 2*time.Second)
	if pc.max != 1000 {
		t.Errorf("after a quick commit: bound %d, want 1000 (doubled)", pc.max)
	}
	pc.outOfTime(1000, 8*time.Second, 2*time.Second)
	if pc.max != 250 {
		t.Errorf("after 1000 records cut short at 8s with target 2s: bound %d, want 250", pc.max)
	}
	pc.outOfTime(1, 8*time.Second, 2*time.Second)
	if pc.max != 1 {
		t.Errorf("after one record cut short: bound %d, want 1", pc.max)
	}
}
