package wasm

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// order256 is a 256-byte JSON order, the record the transform benchmarks
// share (see also transform/jq's).
const order256 = `{"order_id":"ord-000123456","customer_id":"cust-98765","amount_cents":12345,"currency":"EUR","status":"paid","items":[{"sku":"sku-1","qty":2},{"sku":"sku-22","qty":1}],"created_at":"2026-11-29T10:00:00Z","region":"eu-west","note":"leave at the door......"}`

// BenchmarkWasm is the per-record cost of the example plugins on a
// 256-byte record, host and guest included: uppercase with the default
// deadline and without one (PROCESSOR_WASM_TIMEOUT=0), and enrich, which
// parses the JSON order with encoding/json inside the guest.
func BenchmarkWasm(b *testing.B) {
	for _, c := range []struct {
		name, guest string
		timeout     time.Duration
	}{
		{"uppercase", uppercase, 100 * time.Millisecond},
		{"uppercase-no-deadline", uppercase, 0},
		{"enrich", enrich, 100 * time.Millisecond},
		{"enrich-no-deadline", enrich, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := newTest(b, c.guest, func(s *Settings) { s.Timeout = c.timeout })
			benchTransform(b, tr)
		})
	}
}

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
		if res, err := tr.Process(ctx, src, rec, out[:0]); err != nil || len(res) != 1 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkInstantiate is what a new instance costs (after a trap, or for
// a concurrent caller): why instances are pooled and never created per
// record.
func BenchmarkInstantiate(b *testing.B) {
	tr := newTest(b, uppercase)
	b.ReportAllocs()
	for b.Loop() {
		inst, err := tr.instantiate()
		if err != nil {
			b.Fatal(err)
		}
		inst.close()
	}
}
