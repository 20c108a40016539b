package jq

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/identity"
)

// order256 is a 256-byte JSON order, the record the transform benchmarks
// share (see also transform/wasm's).
const order256 = `{"order_id":"ord-000123456","customer_id":"cust-98765","amount_cents":12345,"currency":"EUR","status":"paid","items":[{"sku":"sku-1","qty":2},{"sku":"sku-22","qty":1}],"created_at":"2026-11-29T10:00:00Z","region":"eu-west","note":"leave at the door......"}`

func benchTransform(b *testing.B, tr transform.Transform) {
	if len(order256) != 256 {
		b.Fatalf("the benchmark record is %d bytes, want 256", len(order256))
	}
	src := transform.Source{Topic: "orders", Partition: 3, Offset: 12345}
	key, value := []byte("cust-98765"), []byte(order256)
	rec := &kgo.Record{}
	out := make([]*kgo.Record, 0, 4)
	ctx := context.Background()
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		*rec = kgo.Record{Key: key, Value: value}
		if _, err := tr.Process(ctx, src, rec, out[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdentity is the baseline: the cost of a transform call.
func BenchmarkIdentity(b *testing.B) { benchTransform(b, identity.Transform{}) }

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
			benchTransform(b, tr)
		})
	}
}
