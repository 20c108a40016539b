// Package transform defines what a transform is, the registry transforms
// are found in by name, and the chain that runs them in order.
//
// A transform is the one required method Process. Extras are optional
// interfaces found by type assertion: io.Closer to release resources at
// shutdown. Built-in transforms live in sub-packages and register
// themselves in init(), the database/sql way; the registry panics on a
// duplicate name.
package transform

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Source is where an input record came from. It is passed to every stage of
// the chain unchanged, so a transform can read it even for records an
// earlier stage created.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Transform turns one record into zero, one or many records.
//
// Process appends its output records to out and returns the extended
// slice, the strconv.Append way, so a chain reuses its buffers and the
// per-record path allocates nothing. It may modify rec in place and append
// it (the cheapest way to emit one record), append new records, or append
// nothing to filter rec out. Each appended record must be a distinct
// *kgo.Record that the transform does not touch again.
//
// A record's Topic chooses where it is written: empty means the processor's
// default output topic. The pipeline clears Topic on the input record before
// the chain runs; Key, Value, Headers and Timestamp are the input's.
//
// An error fails the input record as a whole: none of its outputs are
// written. Process is called from one goroutine at a time per instance.
type Transform interface {
	Process(ctx context.Context, src Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error)
}

// Func adapts a function to the Transform interface.
type Func func(ctx context.Context, src Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error)

// Process calls f.
func (f Func) Process(ctx context.Context, src Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return f(ctx, src, rec, out)
}

// Error is a failure of one transform on one record. Stage is the chain
// entry that failed ("name" or "name@alias").
type Error struct {
	Stage string
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("transform %s: %v", e.Stage, e.Err) }

// Unwrap returns the transform's own error.
func (e *Error) Unwrap() error { return e.Err }

// PanicError is what a panicking transform's record fails with.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the goroutine's stack at the panic, for the debug log
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
