package tick

import (
	"context"
	"testing"
	"time"
)

// Every calls fn once per tick, in order of the ticks' times, and
// returns once ctx ends, with no call after it has returned.
func TestEveryCallsUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var times []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func(now time.Time) {
			times = append(times, now)
			if len(times) == 3 {
				cancel()
			}
		})
	}()
	<-done
	if len(times) != 3 {
		t.Fatalf("fn ran %d times after the cancel at the third call, want 3", len(times))
	}
	for i := 1; i < len(times); i++ {
		if !times[i].After(times[i-1]) {
			t.Errorf("tick %d at %v, not after tick %d at %v", i, times[i], i-1, times[i-1])
		}
	}
}

// A context that has ended before Every starts ends it without a call.
func TestEveryEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Every(ctx, time.Nanosecond, func(time.Time) { t.Error("fn ran on an ended context") })
}
