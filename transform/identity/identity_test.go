package identity

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// A chain passes through only when every stage is identity: twice under
// aliases still does; any other stage, an entry or one the host frames it
// with (a schema codec), does not, and neither does the chain then run in
// the processor's loop alone.
func TestChainPassesThroughOnlyWithIdentityAlone(t *testing.T) {
	touch := transform.Func(func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	})
	reg := &transform.Registry{}
	reg.Register("identity", transform.Plain("", func() (transform.Transform, error) { return Transform{}, nil }))
	reg.Register("other", transform.Plain("", func() (transform.Transform, error) { return touch, nil }))
	build := func(entries ...transform.Entry) *transform.Chain {
		c, err := reg.Build(entries, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	framed := build(transform.Entry{Name: "identity"})
	framed.Frame([]transform.Stage{{Name: "decode", T: touch}}, nil)
	for name, c := range map[string]struct {
		chain *transform.Chain
		want  bool
	}{
		"identity":          {build(transform.Entry{Name: "identity"}), true},
		"identity twice":    {build(transform.Entry{Name: "identity"}, transform.Entry{Name: "identity", Alias: "again"}), true},
		"identity, other":   {build(transform.Entry{Name: "identity"}, transform.Entry{Name: "other"}), false},
		"other":             {build(transform.Entry{Name: "other"}), false},
		"identity, decoded": {framed, false},
	} {
		if got := c.chain.PassThrough(); got != c.want {
			t.Errorf("%s: PassThrough() = %v, want %v", name, got, c.want)
		}
	}
}
