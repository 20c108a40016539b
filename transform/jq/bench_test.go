package jq

import (
	"testing"

	"github.com/streamproc/processor/transform/identity"
	"github.com/streamproc/processor/transform/transformtest"
)

// BenchmarkIdentity is the baseline: the cost of a transform call.
func BenchmarkIdentity(b *testing.B) { transformtest.Bench(b, identity.Transform{}, 1) }

// BenchmarkJQ is the per-record cost of jq programs on a 256-byte JSON
// value: parse, run, encode.
func BenchmarkJQ(b *testing.B) {
	for _, c := range []struct{ name, expr string }{
		{"identity", "."},
		{"map", ".amount_cents *= 2"},
		{"project", "{order_id, amount_cents}"},
		{"filter-out", `select(.status == "cancelled")`},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(&Settings{Expr: c.expr})
			if err != nil {
				b.Fatal(err)
			}
			transformtest.Bench(b, tr, -1)
		})
	}
}
