package transform

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// LateInfo says why a stateful stage finds a record late.
type LateInfo struct {
	// Store is the stage's store, the label of
	// processor_records_late_total.
	Store string
	// StreamTime is the stream time as of the record; By how late it is
	// (the stream time less the time its window closed, end plus grace),
	// in milliseconds.
	StreamTime, By int64
	// WindowStart and WindowEnd (exclusive) are its window's bounds in
	// Unix milliseconds, when Windowed.
	WindowStart, WindowEnd int64
	Windowed               bool
}

// LateHandler is what the processor puts in the context of Process (the
// same value as its Stores) to take a stage's late records.
type LateHandler interface {
	// Late counts rec as late (processor_records_late_total{store}, once
	// its transaction commits; a record failed for good is not counted)
	// and, when a late topic is set (PROCESSOR_LATE_TOPIC), routes rec
	// there with the processor.late.* headers added, and returns true:
	// the stage then emits rec in place of its output, so that it is
	// written inside the same transaction.
	Late(rec *kgo.Record, info LateInfo) bool
}

// Late hands rec, found late by a stateful stage, to the processor (see
// LateHandler) and reports whether the stage is to emit it, routed to
// the late topic. Without a processor that takes late records (a run
// outside one) it returns false: the stage drops or passes it as it
// does without a late topic.
func Late(ctx context.Context, rec *kgo.Record, info LateInfo) bool {
	h, ok := ctx.Value(storesKey{}).(LateHandler)
	if !ok || h == nil {
		return false
	}
	return h.Late(rec, info)
}
