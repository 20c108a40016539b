package aggregate

import (
	"testing"
	"time"

	"github.com/streamproc/processor/transform/transformtest"
)

// BenchmarkAggregate is the per-record cost of the aggregate transform on
// transformtest's 256-byte order, with stores in memory (a Go map): the
// JSON parse, the jq programs of FIELD and BY, the exact arithmetic, the
// store's Get and Put and the output's encoding, but not the state
// package's transaction buffer, changelog or Pebble (state's own
// benchmarks measure those). One key throughout, so every record after
// the first finds its aggregate.
func BenchmarkAggregate(b *testing.B) {
	base := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	steady := func(int) time.Time { return base }
	for _, c := range []struct {
		name string
		s    Settings
		at   func(int) time.Time
	}{
		// The make bench row's chain, on this order's field names.
		{"sum .amount_cents by .customer_id", Settings{Function: "sum", Field: ".amount_cents", By: ".customer_id"}, steady},
		// No JSON parse: the record key is the group key.
		{"count by record key", Settings{Function: "count"}, steady},
		// A new 1-minute window every 60 records.
		{"count by record key, 1m windows", Settings{Function: "count", Window: time.Minute},
			func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }},
		{"max .amount_cents by .customer_id, 1m windows", Settings{Function: "max", Field: ".amount_cents", By: ".customer_id", Window: time.Minute},
			func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.s.Store = "aggregate"
			tr, err := New(&c.s)
			if err != nil {
				b.Fatal(err)
			}
			transformtest.BenchStateful(b, tr, 1, c.at)
		})
	}
}
