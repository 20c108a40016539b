// Package identity registers the "identity" transform, which passes every
// record through unchanged. It is the default chain, and the baseline the
// benchmarks compare other transforms against.
package identity

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

func init() {
	transform.Register("identity", transform.Plain("passes every record through unchanged", func() (transform.Transform, error) {
		return Transform{}, nil
	}))
}

// Transform is the identity transform: it appends the input record itself,
// so it costs no allocation.
type Transform struct{}

// Process appends rec to out.
func (Transform) Process(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, rec), nil
}

// Touches returns no part: identity reads and writes neither key nor
// value, so schema-encoded bytes pass through it undecoded.
func (Transform) Touches() transform.Parts { return 0 }

// PassesThrough reports true: identity appends its input unchanged and can
// neither fail nor block, so the processor runs an identity-only chain in
// its loop rather than on the workers (transform.PassThrough).
func (Transform) PassesThrough() bool { return true }
