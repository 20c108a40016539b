// Package backoff is the one wait between retries that every retry loop
// of the processor uses: a ceiling that doubles from a base up to a cap,
// and a wait drawn at random below it ("full jitter"), so that instances
// restarted together do not retry in lockstep against a broker, registry
// or database that is coming back.
//
// Each Backoff has its own random source, seeded from the runtime's
// random generator unless a test gives a seed; there is no shared state.
package backoff

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Jitter is how a wait is drawn below the ceiling.
type Jitter int

const (
	// Full draws a wait uniformly from 0 to the ceiling: the most spread,
	// for loops that retry until they succeed, where a short wait costs
	// no more than one attempt.
	Full Jitter = iota
	// Equal draws a wait uniformly from half the ceiling to the ceiling:
	// for loops with a bounded number of retries, whose waits together
	// must give a failing dependency a guaranteed time to recover before
	// the retries run out.
	Equal
)

// Policy is a backoff's bounds: the n-th retry (from 0) waits at most
// min(Cap, Base·2ⁿ).
type Policy struct {
	Base, Cap time.Duration
	Jitter    Jitter
}

// Ceiling is the longest wait before the n-th retry (from 0):
// min(Cap, Base·2ⁿ); 0 for a Base or Cap not above 0.
func (p Policy) Ceiling(n int) time.Duration {
	if p.Base <= 0 || p.Cap <= 0 {
		return 0
	}
	c := min(p.Base, p.Cap)
	for i := 0; i < n && c < p.Cap; i++ {
		if c > p.Cap/2 {
			c = p.Cap // doubling would pass it, or overflow
		} else {
			c *= 2
		}
	}
	return c
}

// Floor is the shortest wait before the n-th retry: 0 with Full jitter,
// half the ceiling with Equal.
func (p Policy) Floor(n int) time.Duration {
	if p.Jitter == Equal {
		return p.Ceiling(n) / 2
	}
	return 0
}

// Backoff draws waits by its Policy. A loop calls Next before each retry
// and Reset after a success; a caller that counts its own failures asks
// for the n-th wait with At. Its methods are safe for concurrent use.
type Backoff struct {
	p   Policy
	mu  sync.Mutex
	rng *rand.Rand
	n   int // retries since the last Reset
}

// New returns a Backoff by p with a random source of its own, seeded
// from the runtime's random generator.
func New(p Policy) *Backoff { return NewSeeded(p, rand.Uint64()) }

// NewSeeded returns a Backoff by p whose random source is seeded with
// seed: two with the same seed draw the same waits (for tests).
func NewSeeded(p Policy, seed uint64) *Backoff {
	return &Backoff{p: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Policy returns the backoff's bounds.
func (b *Backoff) Policy() Policy { return b.p }

// Next returns the wait before the next retry, and counts the retry.
func (b *Backoff) Next() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.draw(b.n)
	b.n++
	return d
}

// At returns a wait before the n-th retry (from 0) without counting it;
// n below 0 counts as 0.
func (b *Backoff) At(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.draw(max(n, 0))
}

// Reset starts the count of retries again, after a success.
func (b *Backoff) Reset() {
	b.mu.Lock()
	b.n = 0
	b.mu.Unlock()
}

// draw returns a wait between the n-th retry's floor and ceiling, in
// whole milliseconds when the ceiling is a millisecond or more (so that
// logs read plainly). The caller holds mu.
func (b *Backoff) draw(n int) time.Duration {
	lo, hi := b.p.Floor(n), b.p.Ceiling(n)
	unit := time.Duration(1)
	if hi >= time.Millisecond {
		unit = time.Millisecond
		lo = (lo + unit - 1) / unit * unit // rounded up: never below the floor
		hi = hi / unit * unit
	}
	if hi <= lo {
		return hi
	}
	return lo + time.Duration(b.rng.Int64N(int64((hi-lo)/unit)+1))*unit
}

// Sleep waits d, or until ctx ends; it returns ctx.Err() when ctx ended
// first, nil otherwise.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
