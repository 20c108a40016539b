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

// keeper is a stateful transform, keeping its state by the record key or
// not (KeyScoped), touching only the value.
type keeper struct {
	ordered
	byKey bool
}

func (k keeper) Stores() []string         { return []string{"s"} }
func (k keeper) KeyScoped() bool          { return k.byKey }
func (k keeper) Touches() transform.Parts { return transform.PartValue }

// valueOnly touches only values.
type valueOnly struct{ transform.Func }

func (valueOnly) Touches() transform.Parts { return transform.PartValue }

// Key ordering is exact for a chain whose stateful stages keep state by
// the record key as it arrived: a stage keeping it by anything else, or
// one after a stage that may change the key, is the conflict; a host
// stage (a key decode) before it is not.
func TestKeyOrderConflict(t *testing.T) {
	r := &transform.Registry{}
	r.Register("bykey", transform.Plain("", func() (transform.Transform, error) {
		return keeper{ordered{transform.Func(tag), true}, true}, nil
	}))
	r.Register("byvalue", transform.Plain("", func() (transform.Transform, error) {
		return keeper{ordered{transform.Func(tag), true}, false}, nil
	}))
	r.Register("values", transform.Plain("", func() (transform.Transform, error) { return valueOnly{transform.Func(tag)}, nil }))
	r.Register("anything", fn(tag))
	for _, c := range []struct {
		entries  []string
		conflict string // the entry named, "" for none
	}{
		{[]string{"anything"}, ""},
		{[]string{"bykey"}, ""},
		{[]string{"values", "bykey"}, ""},
		{[]string{"bykey", "anything"}, ""},
		{[]string{"byvalue"}, "byvalue"},
		{[]string{"anything", "bykey"}, "bykey"},
		{[]string{"values", "anything", "bykey"}, "bykey"},
	} {
		var es []transform.Entry
		for _, e := range c.entries {
			es = append(es, transform.Entry{Name: e})
		}
		ch, err := r.Build(es, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch.Frame([]transform.Stage{{Name: "decode", T: transform.Func(tag)}}, nil)
		e, why, ok := ch.KeyOrderConflict()
		switch {
		case c.conflict == "" && !ok:
			t.Errorf("%v: conflict %s (%s), want none", c.entries, e, why)
		case c.conflict != "" && (ok || e.Name != c.conflict || why == ""):
			t.Errorf("%v: KeyOrderConflict() = %s, %q, %v; want %s", c.entries, e, why, ok, c.conflict)
		}
	}
}
