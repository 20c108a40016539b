package pipeline

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/internal/backoff"
)

// The pipeline's waits keep the bounds the manual gives (errors.md,
// design.md, postgres.md, schemas.md): a record's retries between half
// and all of 10ms doubling to 1s; after aborts in a row below 50ms
// doubling to 2s; after an outage's aborts below 100ms doubling to 5s.
// A pipeline's own instances draw within them, and two pipelines do not
// draw alike.
func TestWaitsKeepDocumentedBounds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          backoff.Policy
		first, cap time.Duration
		jitter     backoff.Jitter
	}{
		{"retry", retryPolicy(), 10 * time.Millisecond, time.Second, backoff.Equal},
		{"abort", abortPolicy(), 50 * time.Millisecond, 2 * time.Second, backoff.Full},
		{"outage", outagePolicy(), 100 * time.Millisecond, 5 * time.Second, backoff.Full},
	} {
		if tc.p.Ceiling(0) != tc.first || tc.p.Ceiling(1) != 2*tc.first || tc.p.Ceiling(100) != tc.cap || tc.p.Jitter != tc.jitter {
			t.Errorf("%s: ceilings %s, %s ... %s, jitter %d; want %s doubling to %s, jitter %d",
				tc.name, tc.p.Ceiling(0), tc.p.Ceiling(1), tc.p.Ceiling(100), tc.p.Jitter, tc.first, tc.cap, tc.jitter)
		}
	}
	chain := loopChain(t, passThrough)
	newPipeline := func() *Pipeline {
		p, err := New(chain, Options{OutputTopic: "out", CommitInterval: time.Second, MaxRecordsPerTxn: 1, Metrics: NewMetrics(prometheus.NewRegistry())})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := newPipeline(), newPipeline()
	differ := false
	for n := range 12 {
		for _, w := range []struct {
			name string
			a, b *backoff.Backoff
		}{{"retry", a.retryWait, b.retryWait}, {"abort", a.health.abortWait, b.health.abortWait}, {"outage", a.health.outageWait, b.health.outageWait}} {
			p := w.a.Policy()
			da, db := w.a.At(n), w.b.At(n)
			for _, d := range []time.Duration{da, db} {
				if d < p.Floor(n) || d > p.Ceiling(n) {
					t.Errorf("%s wait before retry %d = %s, want within [%s, %s]", w.name, n, d, p.Floor(n), p.Ceiling(n))
				}
			}
			differ = differ || da != db
		}
	}
	if !differ {
		t.Error("two pipelines drew the same 36 waits: they retry in lockstep")
	}
}
