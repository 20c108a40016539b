package transform

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupKeyer is an optional interface of a Stateful transform that keeps
// its state by something other than the record key as it arrived (a BY
// expression), or behind a stage that may change the key: the processor
// then repartitions the records by the group key before the stage (a hop
// through the topic <group>-<store>-repartition), so that every record of
// one group reaches the one partition that keeps its state. GroupKey
// returns exactly the bytes the stage keeps the record's state by, or the
// error the stage would fail the record with.
type GroupKeyer interface {
	GroupKey(ctx context.Context, r *kgo.Record) ([]byte, error)
}

// KeyPartitioned is an optional interface of a Stateful transform: true
// when the user declared (PROCESSOR_<STAGE>_PARTITIONED_BY_KEY=true) that
// the input is already partitioned by the stage's group key, so that no
// hop is needed.
type KeyPartitioned interface {
	PartitionedByKey() bool
}

// partitionedByKey reports whether t declares its input partitioned by
// its group key.
func partitionedByKey(t Transform) bool {
	kp, ok := t.(KeyPartitioned)
	return ok && kp.PartitionedByKey()
}

// keyScoped reports whether t is KeyScoped and says so.
func keyScoped(t Transform) bool {
	ks, ok := t.(KeyScoped)
	return ok && ks.KeyScoped()
}

// Hop returns the index of the first stage whose state needs a
// repartition hop, and its entry: a Stateful stage that can name its
// group key (GroupKeyer), that does not declare its input partitioned by
// it (KeyPartitioned), and whose group key is not the record key as it
// arrived: it is not KeyScoped, or a stage before it may change the key
// (TouchesOf has PartKey). ok is false when no stage needs one. A
// Stateful stage that cannot name its group key keeps its state by the
// input's partitions, as it always did.
func (c *Chain) Hop() (at int, e Entry, ok bool) {
	keyChanged := false
	for i := range c.stages {
		s := &c.stages[i]
		if s.host {
			continue
		}
		if len(StoresOf(s.t)) > 0 && !partitionedByKey(s.t) && (!keyScoped(s.t) || keyChanged) {
			if _, isGK := s.t.(GroupKeyer); isGK {
				return i, s.entry, true
			}
		}
		if TouchesOf(s.t)&PartKey != 0 {
			keyChanged = true
		}
	}
	return 0, Entry{}, false
}

// AfterHop returns the first Stateful entry after the hop at at that does
// not declare its input partitioned by its group key: its state would
// need a second hop, which the processor does not make. ok is false when
// there is none.
func (c *Chain) AfterHop(at int) (e Entry, ok bool) {
	for i := at + 1; i < len(c.stages); i++ {
		s := &c.stages[i]
		if !s.host && len(StoresOf(s.t)) > 0 && !partitionedByKey(s.t) {
			return s.entry, true
		}
	}
	return Entry{}, false
}

// GroupKeyerAt returns the GroupKeyer of the stage at at (Hop's index).
func (c *Chain) GroupKeyerAt(at int) GroupKeyer {
	gk, _ := c.stages[at].t.(GroupKeyer)
	return gk
}

// StoresBefore returns the stores of the stages before at, in stage
// order: with a hop at at, they are partitioned like the input, the
// others like the repartition topic.
func (c *Chain) StoresBefore(at int) []string {
	var names []string
	for _, s := range c.stages[:at] {
		names = append(names, StoresOf(s.t)...)
	}
	return names
}

// Split returns the two segments of the chain around a hop at at (Hop's
// index): the stages before at followed by out, and in followed by the
// stages from at on. The segments share the chain's transforms: close
// the chain, never a segment. Records of the input run the first segment,
// records of the repartition topic the second.
func (c *Chain) Split(at int, out, in []Stage) (before, after *Chain) {
	before = &Chain{maxBytes: c.maxBytes, names: c.names}
	for _, s := range c.stages[:at] {
		before.stages = append(before.stages, s)
	}
	for _, s := range out {
		before.stages = append(before.stages, s.stage())
	}
	after = &Chain{maxBytes: c.maxBytes, names: c.names}
	for _, s := range in {
		after.stages = append(after.stages, s.stage())
	}
	after.stages = append(after.stages, c.stages[at:]...)
	return before, after
}
