package state

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The lanes run each partition's jobs in the order they were handed
// over, and jobs of different partitions at once.
func TestAppliersKeepEachPartitionsOrder(t *testing.T) {
	plan := map[part]*restoring{}
	for p := range int32(6) {
		plan[part{"t", p}] = &restoring{p: part{"t", p}}
	}
	a := newAppliers(plan)
	var mu sync.Mutex
	ran := map[int32][]int{}
	var running, most atomic.Int32
	for i := range 200 {
		for _, r := range plan {
			err := a.hand(r, func() error {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(10 * time.Microsecond)
				mu.Lock()
				ran[r.p.partition] = append(ran[r.p.partition], i)
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatalf("hand: %v", err)
			}
		}
	}
	if err := a.wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
	want := make([]int, 200)
	for i := range want {
		want[i] = i
	}
	for p, got := range ran {
		if !slices.Equal(got, want) {
			t.Errorf("partition %d ran its jobs in the order %v, want 0 to 199 in turn", p, got)
		}
	}
	if len(ran) != 6 {
		t.Errorf("%d partitions ran jobs, want 6", len(ran))
	}
	if lanes := len(a.lanes); lanes > 1 && most.Load() < 2 {
		t.Errorf("%d lanes, but no two jobs ran at once", lanes)
	}
}

// After a job fails, the lanes skip what is left, every later hand-over
// returns the failure, and wait returns it.
func TestAppliersStopAtTheFirstFailure(t *testing.T) {
	r := &restoring{p: part{"t", 0}}
	a := newAppliers(map[part]*restoring{r.p: r})
	boom := errors.New("boom")
	var after atomic.Int32
	if err := a.hand(r, func() error { return boom }); err != nil {
		t.Fatalf("hand before any failure: %v", err)
	}
	// The lane runs the failing job soon; until it has, hand-overs queue
	// jobs, which the lane must skip. The deadline is for a stalled
	// machine, not a measure.
	var handErr error
	for i, deadline := 0, time.Now().Add(10*time.Second); handErr == nil && time.Now().Before(deadline); i++ {
		handErr = a.hand(r, func() error { after.Add(1); return fmt.Errorf("job %d", i) })
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(handErr, boom) {
		t.Errorf("a hand-over after the failure returned %v, want %v", handErr, boom)
	}
	if err := a.wait(); !errors.Is(err, boom) {
		t.Errorf("wait returned %v, want %v", err, boom)
	}
	if n := after.Load(); n != 0 {
		t.Errorf("%d jobs ran after the failure, want 0", n)
	}
}
