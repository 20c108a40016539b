// Package transformtest holds what the transforms' tests and benchmarks
// share, so that their per-record figures are measured the same way and can
// be compared.
package transformtest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/memstore"
)

// Order256 is a 256-byte JSON order, the record every transform benchmark
// uses.
const Order256 = `{"order_id":"ord-000123456","customer_id":"cust-98765","amount_cents":12345,"currency":"EUR","status":"paid","items":[{"sku":"sku-1","qty":2},{"sku":"sku-22","qty":1}],"created_at":"2026-11-29T10:00:00Z","region":"eu-west","note":"leave at the door......"}`

// Bench runs tr on Order256 once per iteration, reporting bytes and
// allocations per record. wantOutputs is the number of outputs each call
// must return, or -1 for any.
func Bench(b *testing.B, tr transform.Transform, wantOutputs int) {
	bench(b, context.Background(), tr, wantOutputs, nil)
}

// BenchStateful is Bench for a stateful transform (aggregate, dedupe):
// every call runs with in-memory stores in its context (memstore: a Go
// map per store, so the figure is the transform's own work per record,
// not the state package's transaction buffer, its changelog or Pebble),
// and the i-th record, counting from 0, is stamped at(i), so that a
// benchmark chooses which windows its records fall in.
func BenchStateful(b *testing.B, tr transform.Transform, wantOutputs int, at func(i int) time.Time) {
	bench(b, memstore.Stores{}.Context(context.Background()), tr, wantOutputs, at)
}

// bench is Bench and BenchStateful: ctx is every call's context, at (if
// not nil) the i-th record's timestamp.
func bench(b *testing.B, ctx context.Context, tr transform.Transform, wantOutputs int, at func(i int) time.Time) {
	if len(Order256) != 256 {
		b.Fatalf("the benchmark record is %d bytes, want 256", len(Order256))
	}
	src := record.Source{Topic: "orders", Partition: 3, Offset: 12345}
	key, value := []byte("cust-98765"), []byte(Order256)
	rec := &kgo.Record{}
	out := make([]*kgo.Record, 0, 4)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		*rec = kgo.Record{Key: key, Value: value}
		if at != nil {
			rec.Timestamp = at(i)
		}
		i++
		res, err := tr.Process(ctx, src, rec, out[:0])
		if err != nil || (wantOutputs >= 0 && len(res) != wantOutputs) {
			b.Fatal(res, err)
		}
	}
}

// Build builds a chain of the one transform registered as name in
// transform.Default, with opts, and with settings given by their declared
// names (EXPR); the others take their defaults. Setting errors are
// *settings.Error.
func Build(name string, settings map[string]string, opts ...transform.BuildOption) (*transform.Chain, error) {
	return transform.Default.Build([]transform.Entry{{Name: name}}, func(_ transform.Entry, setting string) (string, bool) {
		v, ok := settings[setting]
		return v, ok
	}, opts...)
}
