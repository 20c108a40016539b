package transform

import (
	"context"
	"time"
)

// Stream time is, per input partition, the largest record timestamp the
// processor has seen so far in offset order, bounded: a record stamped
// more than PROCESSOR_MAX_FUTURE_SKEW ahead of the wall clock moves it no
// further than the wall clock plus that skew. The processor computes it
// before the records go to the workers and gives each record the stream
// time as of that record (itself included), so that every result that
// depends on it is a function of the input in offset order, not of how
// the input was batched; it is kept with the committed offset, so that a
// restart or a rebalance goes on with the same time. See docs/state.md.

// StreamTimer is what the processor puts in the context of Process (the
// same value as its Stores) to give the record's stream time.
type StreamTimer interface {
	// StreamTime is the stream time as of the record being processed, in
	// Unix milliseconds; ok is false when none is known.
	StreamTime() (ms int64, ok bool)
}

// StreamTimeOf returns the stream time of the partition of the record
// ctx's Process call runs, as of that record (its own timestamp
// included); ok is false when the processor keeps none (a stateless
// chain, a run outside the processor). It allocates nothing.
func StreamTimeOf(ctx context.Context) (t time.Time, ok bool) {
	ms, ok := StreamMillisOf(ctx)
	if !ok {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// StreamMillisOf is StreamTimeOf in Unix milliseconds, as record
// timestamps are in Kafka.
func StreamMillisOf(ctx context.Context) (ms int64, ok bool) {
	s, ok := ctx.Value(storesKey{}).(StreamTimer)
	if !ok || s == nil {
		return 0, false
	}
	return s.StreamTime()
}
