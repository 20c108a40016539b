package jq

import (
	"context"
	"testing"

	"github.com/streamproc/processor/internal/sample"
)

// BenchmarkSteps compares programs that begin with steps run through
// their steps (Program.Run) and as one gojq program, on the 256-byte
// sample order.
func BenchmarkSteps(b *testing.B) {
	for _, c := range []struct{ name, expr string }{
		{"update", ".amount_cents *= 2"},
		{"modify", ".customer |= ascii_upcase"},
		{"assigns", ".big = (.amount_cents > 100) | .cents = .amount_cents"},
		{"chain", chainExpr},
	} {
		p, err := Compile(c.expr)
		if err != nil || p.steps == nil {
			b.Fatal(c.expr, err)
		}
		in := sample.Order(12345, 100, 256)
		var ps parser
		for _, mode := range []string{"steps", "gojq"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					v, err := ps.parse(in.Value)
					if err != nil {
						b.Fatal(err)
					}
					it := p.code.RunWithContext(context.Background(), v)
					if mode == "steps" {
						it = p.Run(context.Background(), v)
					}
					if r, ok := it.Next(); !ok {
						b.Fatal("no result")
					} else if err, isErr := r.(error); isErr {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
