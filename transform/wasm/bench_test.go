package wasm

import (
	"testing"
	"time"

	"github.com/streamproc/processor/transform/transformtest"
)

// BenchmarkWasm is the per-record cost of the example plugins on a
// 256-byte record, host and guest included: uppercase with the default
// deadline and without one (PROCESSOR_WASM_TIMEOUT=0), and enrich, which
// scans the JSON order inside the guest.
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
			transformtest.Bench(b, tr, 1)
		})
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
