package transform_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// grouper is a stateful stage that names its group key (GroupKeyer),
// keeping state by the record key or not, and may declare its input
// partitioned by it.
type grouper struct {
	keeper
	partitioned bool
	store       string
}

func (g grouper) Stores() []string { return []string{g.store} }

func (grouper) GroupKey(_ context.Context, r *kgo.Record) ([]byte, error) { return r.Value, nil }
func (g grouper) PartitionedByKey() bool                                  { return g.partitioned }

// A chain needs a hop at its first stateful stage that names its group
// key and keeps state by another key than the record key as it arrived,
// unless it declares its input partitioned by it; key ordering is exact
// for that stage behind the hop; a stateful stage after it would need a
// second hop (AfterHop); Split cuts the chain around it with the host's
// stages placed.
func TestChainHop(t *testing.T) {
	r := &transform.Registry{}
	mk := func(store string, byKey, partitioned bool) func() (transform.Transform, error) {
		return func() (transform.Transform, error) {
			return grouper{keeper{ordered{transform.Func(tag), true}, byKey}, partitioned, store}, nil
		}
	}
	r.Register("bykey", transform.Plain("", mk("k", true, false)))
	r.Register("byvalue", transform.Plain("", mk("v", false, false)))
	r.Register("declared", transform.Plain("", mk("d", false, true)))
	r.Register("nokeyer", transform.Plain("", func() (transform.Transform, error) {
		return keeper{ordered{transform.Func(tag), true}, false}, nil
	}))
	r.Register("values", transform.Plain("", func() (transform.Transform, error) { return valueOnly{transform.Func(tag)}, nil }))
	r.Register("anything", fn(tag))
	for _, c := range []struct {
		entries  []string
		hop      string // the hop's entry, "" for none
		after    string // AfterHop's entry
		conflict string // KeyOrderConflict's entry
	}{
		{entries: []string{"bykey"}},
		{entries: []string{"byvalue"}, hop: "byvalue"},
		{entries: []string{"values", "byvalue"}, hop: "byvalue"},
		{entries: []string{"anything", "bykey"}, hop: "bykey"},
		{entries: []string{"declared"}, conflict: "declared"},
		{entries: []string{"nokeyer"}, conflict: "nokeyer"},
		{entries: []string{"bykey@first", "byvalue"}, hop: "byvalue"},
		{entries: []string{"byvalue", "bykey@again"}, hop: "byvalue", after: "bykey"}, // refused at start by AfterHop
		{entries: []string{"byvalue", "declared"}, hop: "byvalue", conflict: "declared"},
	} {
		var es []transform.Entry
		for _, e := range c.entries {
			en, err := transform.ParseEntry(e)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, en)
		}
		ch, err := r.Build(es, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch.Frame([]transform.Stage{{Name: "decode", T: transform.Func(tag)}}, []transform.Stage{{Name: "encode", T: transform.Func(tag)}})
		at, e, ok := ch.Hop()
		if ok != (c.hop != "") || e.Name != c.hop {
			t.Errorf("%v: Hop() = %d, %s, %v; want %q", c.entries, at, e, ok, c.hop)
			continue
		}
		if ce, _, cok := ch.KeyOrderConflict(); cok != (c.conflict == "") || ce.Name != c.conflict {
			t.Errorf("%v: KeyOrderConflict() = %s, %v; want %q", c.entries, ce, cok, c.conflict)
		}
		if !ok {
			continue
		}
		if ae, aok := ch.AfterHop(at); aok != (c.after != "") || ae.Name != c.after {
			t.Errorf("%v: AfterHop() = %s, %v; want %q", c.entries, ae, aok, c.after)
		}
		before, after := ch.Split(at, []transform.Stage{{Name: "out", T: transform.Func(tag)}}, []transform.Stage{{Name: "in", T: transform.Func(tag)}})
		if before.Len()+after.Len() != ch.Len()+2 || len(before.Entries())+len(after.Entries()) != len(es) {
			t.Errorf("%v: segments of %d and %d stages for %d", c.entries, before.Len(), after.Len(), ch.Len())
		}
		if got := after.Entries()[0].Name; got != c.hop {
			t.Errorf("%v: the second segment begins with %s, want %s", c.entries, got, c.hop)
		}
	}
}
