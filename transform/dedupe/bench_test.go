package dedupe

import (
	"testing"
	"time"

	"github.com/streamproc/processor/transform/transformtest"
)

// BenchmarkDedupe is the per-record cost of the dedupe transform on
// transformtest's 256-byte order, with stores in memory (a Go map): the
// id's jq program (or the record key), the store's Get and, for a record
// that passes, its Put; not the state package's transaction buffer,
// changelog or Pebble. The order's id is the same on every record, so
// "filtered" is a duplicate after the first, and "passes" stamps each
// record a window after the one before: its id is seen again, its window
// over, as a new id would be.
func BenchmarkDedupe(b *testing.B) {
	base := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	window := time.Minute
	steady := func(int) time.Time { return base }
	passes := func(i int) time.Time { return base.Add(time.Duration(i) * window) }
	for _, c := range []struct {
		name string
		by   string
		at   func(int) time.Time
		want int
	}{
		{"by .order_id, passes", ".order_id", passes, 1},
		{"by .order_id, filtered", ".order_id", steady, -1},
		{"by record key, passes", "", passes, 1},
		{"by record key, filtered", "", steady, -1},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(&Settings{By: c.by, Window: window, Store: "dedupe"})
			if err != nil {
				b.Fatal(err)
			}
			transformtest.BenchStateful(b, tr, c.want, c.at)
		})
	}
}
