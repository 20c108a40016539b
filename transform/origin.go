package transform

import "context"

// Originer is what the processor puts in the context of Process (the
// same value as its Stores) to name the original input of the record
// being processed. Behind a repartition hop (Chain.Hop) a stage runs a
// record of the repartition topic, whose Source is that topic's; the
// outputs are stamped with the lineage of the input the record was made
// from, and a stage that keeps an input's identity for later (a window
// that emits when it closes) keeps that one.
type Originer interface {
	// Origin is the input the record being processed was made from; ok
	// is false when it is the record's own Source (no hop).
	Origin() (src Source, ok bool)
}

// OriginOf returns the original input of the record ctx's Process call
// runs: behind a repartition hop the input record the repartition
// record was made from, otherwise src, the record's own Source. It
// allocates nothing.
func OriginOf(ctx context.Context, src Source) Source {
	o, ok := ctx.Value(storesKey{}).(Originer)
	if !ok || o == nil {
		return src
	}
	if s, ok := o.Origin(); ok {
		return s
	}
	return src
}
