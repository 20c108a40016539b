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
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Source is where an input record came from. It is passed to every stage of
// the chain unchanged, so a transform can read it even for records an
// earlier stage created.
type Source = record.Source

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
// written, and the processor's error policy decides what happens to the input. Mark a
// transient error with Retriable to have the record retried. Process is
// called from one goroutine at a time per instance, with a ctx that carries
// the processor's per-record deadline when one is set.
//
// A transform must not modify the bytes that rec's Key, Value or header
// values point to: assign new slices instead. The pipeline keeps the
// original ones to write a dead letter if a later stage fails.
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

// Retriable marks err as transient: the pipeline runs the record through
// the chain again, with backoff, up to the processor's retry count within the
// transaction's time budget, before it treats the error as permanent. Use it
// for failures that may pass, such as a timeout of a lookup.
func Retriable(err error) error {
	if err == nil {
		return nil
	}
	return &retriableError{err}
}

// IsRetriable reports whether err was marked with Retriable.
func IsRetriable(err error) bool {
	var r *retriableError
	return errors.As(err, &r)
}

type retriableError struct{ err error }

func (e *retriableError) Error() string { return e.err.Error() }
func (e *retriableError) Unwrap() error { return e.err }

// Timed is an optional interface of a transform whose every call carries
// its own deadline (the wasm transform's TIMEOUT setting). The
// processor checks at start that one record's worst case, retries
// included, fits the transaction's time budget.
type Timed interface {
	// CallTimeout is the longest one Process call may take; 0 is unbounded.
	CallTimeout() time.Duration
}

// Destinations is an optional interface of a transform that writes to fixed
// topics named in its settings (the route transform's DEFAULT
// setting). The processor checks at start that they exist,
// as it does for the output topic.
type Destinations interface {
	// Destinations maps a setting's field name (e.g. "DEFAULT") to the
	// topic it names; unset settings are left out.
	Destinations() map[string]string
}

// Unavailable marks err as the failure of a service the transform depends
// on (a Schema Registry, a lookup service) that is not the record's fault:
// the record is neither retried as a record nor failed under the error
// policy. The processor aborts the transaction, backs off, retries it, and
// reports itself not ready (and, once it lasts, unhealthy) with err's
// message until the service answers again. Say in err which setting names
// the service, so that an operator knows where to look.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err}
}

// IsUnavailable reports whether err was marked with Unavailable.
func IsUnavailable(err error) bool {
	var u *unavailableError
	return errors.As(err, &u)
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// Fatal marks err as one the processor cannot go on after and no retry
// can clear, such as a service refusing the processor's credentials: the
// transaction is aborted and the processor stops with exit code 1, as it
// does when a broker refuses them. No record is failed for it.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err}
}

// IsFatal reports whether err was marked with Fatal.
func IsFatal(err error) bool {
	var f *fatalError
	return errors.As(err, &f)
}

type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// Parts are parts of a record: what a transform reads or writes (see
// Toucher).
type Parts uint8

// The parts of a record a transform may touch.
const (
	PartKey Parts = 1 << iota
	PartValue
	// PartAll is every part: what a transform without Touches touches.
	PartAll = PartKey | PartValue
)

// Toucher is an optional interface of a transform that says which of a
// record's key and value it reads or writes. The processor decodes
// schema-encoded keys and values (PROCESSOR_KEY_FORMAT,
// PROCESSOR_VALUE_FORMAT) only for a chain that touches them, so a chain
// of transforms that only look at headers or topics passes the encoded
// bytes through untouched, at no cost. A transform without Touches is
// taken to touch both.
type Toucher interface {
	Touches() Parts
}

// TouchesOf returns what t touches: its Touches, or PartAll.
func TouchesOf(t Transform) Parts {
	if tt, ok := t.(Toucher); ok {
		return tt.Touches()
	}
	return PartAll
}

// Ordered is an optional interface of a transform that must see records in
// their input order: one that keeps state from record to record, such as
// an aggregation or a de-duplication. A chain is ordered when any of its
// stages is (Chain.Ordered). With several workers (PROCESSOR_WORKERS) the
// processor runs an ordered chain as PROCESSOR_ORDERING says:
//
//   - partition (the default): all of a partition's records run on one
//     worker, one after another in offset order; partitions run in
//     parallel on the workers.
//   - key: a partition's records are spread over the workers by a hash of
//     their key; each key's records run on one worker in offset order,
//     records of different keys concurrently. Records with a null key
//     keep their partition's order among themselves, on one worker.
//
// Either way a partition (under key: a key) stays with one worker, and so
// with one instance of the transform, while the processor keeps its
// partitions and its worker count; but see Concurrent for a chain that
// bounds its records at once. What the instance sees is not undone
// by an aborted transaction: the records are run again, in the same
// order, in the next attempt. A transform whose Ordered returns false, or
// without the method, may see a partition's records on several workers
// at once, in no order; the outputs are written in input order whatever
// the chain.
type Ordered interface {
	Ordered() bool
}

// PassThrough is an optional interface of a transform whose Process does
// nothing but append its input record, unchanged, to out (identity): it
// reads nothing, keeps nothing, and cannot fail, block or panic. A chain
// of such stages alone (Chain.PassThrough) has nothing to run
// concurrently or to time, so the processor runs it in its loop, without
// handing the records to the workers and the watchdog.
type PassThrough interface {
	PassesThrough() bool
}

// PassesThroughOf reports whether t declares that it passes its input
// through unchanged (PassThrough).
func PassesThroughOf(t Transform) bool {
	p, ok := t.(PassThrough)
	return ok && p.PassesThrough()
}

// OrderedOf reports whether t must see records in order (Ordered).
func OrderedOf(t Transform) bool {
	o, ok := t.(Ordered)
	return ok && o.Ordered()
}

// Concurrent is an optional interface of an ordered transform whose calls
// mostly wait on another service (the http transform's requests), not on
// a CPU, and that bounds how many of a partition's records it runs at
// once. Under PROCESSOR_ORDERING=key the processor runs up to InFlight
// records of one partition at once, on as many instances of the chain,
// whatever PROCESSOR_WORKERS says (more than the workers when InFlight
// is larger, never more than InFlight when it is smaller), each key's
// records one after another in offset order; under
// PROCESSOR_ORDERING=partition, which runs a partition's records one at a
// time, InFlight above 1 is refused at start. A chain's bound is its
// stages' smallest (Chain.InFlight).
//
// Such a chain's keys are dealt to its instances by load, poll by poll,
// not by a hash of the key: a poll's records of one key run on one
// instance in offset order, and the next poll's may run on another
// instance, after them (never at the same time). What an ordered stage of
// the chain keeps from record to record must therefore live in its state
// stores (Stateful), which the instances share, not in the instance.
type Concurrent interface {
	// InFlight is the most records of one partition the transform may
	// have running at once, at least 1.
	InFlight() int
}

// InFlightOf returns t's InFlight, or 0 when t does not declare one.
func InFlightOf(t Transform) int {
	if c, ok := t.(Concurrent); ok {
		return c.InFlight()
	}
	return 0
}
