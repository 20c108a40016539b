package backoff

import (
	"context"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// policies are random bounds, from nanoseconds to hours, with either
// jitter, and the edges: a base above the cap, a base of the cap.
func policies(rng *rand.Rand, n int) []Policy {
	ps := []Policy{
		{Base: 10 * time.Millisecond, Cap: time.Second},
		{Base: 500 * time.Millisecond, Cap: 10 * time.Second},
		{Base: 3 * time.Second, Cap: time.Second},
		{Base: time.Second, Cap: time.Second, Jitter: Equal},
		{Base: 1, Cap: 3 * time.Millisecond / 2, Jitter: Equal},
		{Base: 1, Cap: math.MaxInt64},
		{Base: time.Hour, Cap: math.MaxInt64, Jitter: Equal},
	}
	for range n {
		base := time.Duration(1 + rng.Int64N(int64(time.Minute)))
		cap := time.Duration(1 + rng.Int64N(int64(time.Hour)))
		ps = append(ps, Policy{Base: base, Cap: cap, Jitter: Jitter(rng.IntN(2))})
	}
	return ps
}

// reference is min(Cap, Base·2ⁿ) computed without overflow.
func reference(p Policy, n int) time.Duration {
	v := new(big.Int).Lsh(big.NewInt(int64(p.Base)), uint(n))
	if v.Cmp(big.NewInt(int64(p.Cap))) > 0 {
		return p.Cap
	}
	return time.Duration(v.Int64())
}

// Ceiling is min(Cap, Base·2ⁿ), never overflowing, never decreasing in n.
func TestCeilingMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range policies(rng, 500) {
		prev := time.Duration(0)
		for _, n := range []int{0, 1, 2, 3, 5, 8, 13, 30, 62, 63, 64, 100, 1000} {
			got, want := p.Ceiling(n), reference(p, n)
			if got != want {
				t.Fatalf("%+v: Ceiling(%d) = %s, want %s", p, n, got, want)
			}
			if got < prev {
				t.Fatalf("%+v: Ceiling(%d) = %s fell below %s", p, n, got, prev)
			}
			prev = got
		}
	}
	if c := (Policy{Base: 0, Cap: time.Second}).Ceiling(3); c != 0 {
		t.Errorf("Ceiling with no base = %s, want 0", c)
	}
}

// Every wait lies between the policy's floor and its ceiling: never
// negative, never above the cap, never below half the ceiling with Equal.
func TestWaitsWithinBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i, p := range policies(rng, 200) {
		b := NewSeeded(p, uint64(i))
		for n := range 70 {
			lo, hi := p.Floor(n), p.Ceiling(n)
			if p.Jitter == Full && lo != 0 {
				t.Fatalf("%+v: Floor(%d) = %s with full jitter", p, n, lo)
			}
			for range 20 {
				d := b.At(n)
				if d < 0 || d > p.Cap || d < lo || d > hi {
					t.Fatalf("%+v: At(%d) = %s, want within [%s, %s]", p, n, d, lo, hi)
				}
			}
			if d := b.Next(); d < lo || d > hi {
				t.Fatalf("%+v: Next() for retry %d = %s, want within [%s, %s]", p, n, d, lo, hi)
			}
		}
	}
}

// The mean wait grows with the retries, to about half the ceiling (Full)
// or three quarters of it (Equal), until the cap.
func TestWaitsGrowInExpectation(t *testing.T) {
	for _, p := range []Policy{
		{Base: 100 * time.Millisecond, Cap: 5 * time.Second},
		{Base: 10 * time.Millisecond, Cap: time.Second, Jitter: Equal},
	} {
		b := NewSeeded(p, 7)
		const draws = 4000
		prev := time.Duration(-1)
		for n := range 8 {
			var sum time.Duration
			for range draws {
				sum += b.At(n)
			}
			mean := sum / draws
			want := p.Ceiling(n) / 2
			if p.Jitter == Equal {
				want = p.Ceiling(n) * 3 / 4
			}
			if diff := (mean - want).Abs(); diff > p.Ceiling(n)/20 {
				t.Errorf("%+v: mean wait before retry %d = %s, want about %s", p, n, mean, want)
			}
			if p.Ceiling(n) > p.Ceiling(max(n-1, 0)) && mean <= prev {
				t.Errorf("%+v: mean wait before retry %d = %s, not above the one before (%s)", p, n, mean, prev)
			}
			prev = mean
		}
	}
}

// Next counts retries and Reset starts them again: after a Reset the
// waits are the first retry's again.
func TestResetStartsAgain(t *testing.T) {
	p := Policy{Base: 10 * time.Millisecond, Cap: time.Second, Jitter: Equal}
	b := NewSeeded(p, 11)
	for n := range 10 {
		if d := b.Next(); d < p.Floor(n) || d > p.Ceiling(n) {
			t.Fatalf("Next() for retry %d = %s, want within [%s, %s]", n, d, p.Floor(n), p.Ceiling(n))
		}
	}
	if d := b.Next(); d < 500*time.Millisecond {
		t.Fatalf("Next() after 10 retries = %s, want at least half the cap", d)
	}
	b.Reset()
	if d := b.Next(); d < 5*time.Millisecond || d > 10*time.Millisecond {
		t.Errorf("Next() after Reset = %s, want the first retry's [5ms, 10ms]", d)
	}
	if d := b.Next(); d < 10*time.Millisecond || d > 20*time.Millisecond {
		t.Errorf("second Next() after Reset = %s, want the second retry's [10ms, 20ms]", d)
	}
}

// Waits spread: instances seeded alike draw alike, instances seeded
// differently do not, and one instance's waits cover the whole range
// rather than bunching (pods restarted together do not retry together).
func TestWaitsSpread(t *testing.T) {
	p := Policy{Base: 500 * time.Millisecond, Cap: 10 * time.Second}
	seq := func(b *Backoff) []time.Duration {
		var s []time.Duration
		for range 8 {
			s = append(s, b.Next())
		}
		return s
	}
	a, same, other := seq(NewSeeded(p, 1)), seq(NewSeeded(p, 1)), seq(NewSeeded(p, 2))
	differ := 0
	for i := range a {
		if a[i] != same[i] {
			t.Fatalf("two instances seeded alike drew %v and %v", a, same)
		}
		if a[i] != other[i] {
			differ++
		}
	}
	if differ < len(a)/2 {
		t.Errorf("instances seeded differently drew %v and %v: %d of %d waits differ", a, other, differ, len(a))
	}
	if x, y := seq(New(p)), seq(New(p)); equal(x, y) {
		t.Errorf("two instances seeded by the runtime drew the same waits %v", x)
	}
	// Ten buckets of the range, 10,000 draws: each bucket holds about a
	// tenth (a bucket off by more than 20% is beyond 6 standard deviations).
	b := NewSeeded(p, 3)
	const draws = 10000
	var buckets [10]int
	ceil := p.Ceiling(3)
	for range draws {
		buckets[min(int(b.At(3)*10/ceil), 9)]++
	}
	for i, c := range buckets {
		if c < draws/10*8/10 || c > draws/10*12/10 {
			t.Errorf("bucket %d of the 4th retry's waits holds %d of %d draws: %v", i, c, draws, buckets)
		}
	}
}

func equal(a, b []time.Duration) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// Waits of a ceiling of a millisecond or more are whole milliseconds.
func TestWaitsInMilliseconds(t *testing.T) {
	b := NewSeeded(Policy{Base: 1500 * time.Microsecond, Cap: time.Second}, 5)
	for n := range 20 {
		if d := b.At(n); d%time.Millisecond != 0 {
			t.Fatalf("At(%d) = %s, not whole milliseconds", n, d)
		}
	}
}

// One Backoff serves goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	p := Policy{Base: time.Millisecond, Cap: time.Second}
	b := New(p)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for n := range 200 {
				if d := b.At(n % 12); d > p.Ceiling(n%12) {
					t.Errorf("At(%d) = %s above its ceiling", n%12, d)
				}
				b.Next()
				if n%50 == 0 {
					b.Reset()
				}
			}
		})
	}
	wg.Wait()
}

// Sleep waits its time, or returns ctx's error once ctx ends.
func TestSleep(t *testing.T) {
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Errorf("Sleep(20ms) = %v after %s", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with an ended context = %v, want context.Canceled", err)
	}
}
