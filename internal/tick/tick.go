// Package tick is the one periodic loop of the processor: a function
// run at a fixed interval until its context ends, for the refreshes that
// keep what the processor shows and uses fresh while nothing else
// happens (the partitions' end offsets, the output schemas, the
// progress line).
package tick

import (
	"context"
	"time"
)

// Every calls fn with the tick's time every interval until ctx ends; the
// first call is one interval after the start. A call that runs longer
// than the interval delays the next one (the ticker drops the ticks it
// missed), so calls never overlap. It returns when ctx ends, with no call
// after that even when a tick was due at the same time; interval
// must be above 0, as for time.NewTicker.
func Every(ctx context.Context, interval time.Duration, fn func(now time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if ctx.Err() != nil { // both were ready: select picked at random
				return
			}
			fn(now)
		}
	}
}
