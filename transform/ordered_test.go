package transform_test

import (
	"testing"

	"github.com/streamproc/processor/transform"
)

// ordered is a transform that says whether it must see records in order.
type ordered struct {
	transform.Func
	yes bool
}

func (o ordered) Ordered() bool { return o.yes }

// A chain is ordered when any of its stages is: an entry or a stage the
// host placed; a transform whose Ordered says false, or without one, is
// not.
func TestChainOrdered(t *testing.T) {
	r := &transform.Registry{}
	r.Register("tag", fn(tag))
	r.Register("stateful", transform.Plain("", func() (transform.Transform, error) { return ordered{transform.Func(tag), true}, nil }))
	r.Register("declines", transform.Plain("", func() (transform.Transform, error) { return ordered{transform.Func(tag), false}, nil }))
	for _, c := range []struct {
		entries []string
		want    bool
	}{
		{[]string{"tag"}, false},
		{[]string{"declines"}, false},
		{[]string{"stateful"}, true},
		{[]string{"tag", "stateful"}, true},
		{[]string{"declines", "tag"}, false},
	} {
		var es []transform.Entry
		for _, e := range c.entries {
			es = append(es, transform.Entry{Name: e})
		}
		ch, err := r.Build(es, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ch.Ordered(); got != c.want {
			t.Errorf("%v: Ordered() = %v, want %v", c.entries, got, c.want)
		}
		if !c.want {
			ch.Frame(nil, []transform.Stage{{Name: "encode", T: ordered{transform.Func(tag), true}}})
			if !ch.Ordered() {
				t.Errorf("%v with an ordered host stage: Ordered() = false", c.entries)
			}
		}
	}
	if transform.OrderedOf(transform.Func(tag)) {
		t.Error("OrderedOf a plain Func = true")
	}
}
