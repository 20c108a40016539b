// Package jq registers the "jq" transform, which runs a jq program
// (its EXPR setting, github.com/itchyny/gojq) on every record's value:
// each result becomes an output record, so a program filters
// (select(...)), maps (.amount_cents *= 2) or flat-maps (.items[]).
//
// The program is compiled once, at start; a program that does not
// compile is a configuration error. Per record, the value is parsed as
// JSON (numbers keep their precision: a 64-bit id stays exact), the
// program runs, and each result is written back JSON-encoded (gojq's
// encoding: object keys sorted). Key, headers, timestamp and any topic an
// earlier stage chose are kept on every output. A value that is not JSON
// (a null value, i.e. a tombstone, included) or a jq runtime error is a
// transform error for the record. The program "." alone is not run in
// gojq: its output, the same bytes, is written straight from the value's
// text, and a value already so written is passed on as it is. A program
// that begins with assignments to constant paths and deletions of keys
// (.amount = (.amount_cents / 100) | .tier = ... | del(.pad)) runs those
// steps on one copy of the value, the assignments that read only keys
// no earlier one wrote as one gojq run, with gojq's results (steps.go).
// All of this, the fast path, is held to gojq byte for byte by the
// differential fuzz target FuzzJQDiff, and keeps gojq's answer even where
// gojq is wrong (gojqbug.go); FAST=false (PROCESSOR_JQ_FAST) turns it off,
// and every program runs in gojq alone (slow.go).
//
// Programs see no environment ($ENV and env are empty), cannot import
// modules, and have no input/inputs. One input may produce at most
// MaxResults outputs, and outputs of at most the chain's limit on one
// record's output bytes (the chain's MaxOutputBytes, counted as
// transform.Size counts them): results are encoded one by one as the
// program yields them, each stopped as soon as the running total passes
// the limit, so a program that copies a large value for each of its parts
// (.items[] as $i | .item = $i) fails the record with a
// *transform.OutputLimitError before it has spent the memory.
//
// What the limit cannot stop is gojq building one result in memory before
// it yields it: [range(1e8)] or "x" * 1e9 allocate gigabytes inside gojq.
// gojq offers no bound on that; it checks the context at every step of a
// program, so the processor's per-record deadline stops
// the first between steps (the record then fails, or is retried, as a
// timeout), while the second is one step that runs to its end.
package jq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

func init() {
	transform.Register("jq", transform.Typed("runs a jq program (EXPR) on JSON values; each result is an output record", New))
}

// Settings are the jq transform's settings, one set per chain entry.
type Settings struct {
	// Expr is the jq program.
	Expr string `setting:"EXPR" required:"true" doc:"the jq program each JSON value runs through; each result is an output record" form:"a jq program such as .amount_cents *= 2, select(.status == \"paid\") or .items[]"`
	// Fast is FAST: true, the default and the zero value, runs programs
	// on the fast path; false runs every program in gojq alone, an escape
	// hatch at a cost in time (slow.go, docs/plugins.md).
	Fast Fast `setting:"FAST" default:"true" doc:"run programs on the fast path (the value parsed and changed in place, leading assignments evaluated directly), held byte for byte to gojq by a differential fuzz test; false runs every program in gojq alone, on encoding/json's parse, written by gojq.Marshal" form:"true or false"`
}

// MaxResults bounds the outputs of one input record, so that a program
// such as repeat(.) fails the record instead of exhausting memory.
const MaxResults = 10_000

// Transform runs one compiled program. It keeps scratch space, so like
// every transform it is called from one goroutine at a time.
type Transform struct {
	prog     *Program
	results  [][]byte // encoded results of the current record, reused
	fast     fastPath // the fast path (fast.go), unused with FAST=false
	maxBytes int64    // the chain's limit on one record's output bytes
	slow     bool     // FAST=false: gojq alone (slow.go)
}

var _ transform.OutputLimiter = (*Transform)(nil)

// LimitOutputBytes sets the most the outputs of one record may hold,
// counted as transform.Size counts them. It implements
// transform.OutputLimiter; the chain calls it when it is built. Until then
// the limit is transform.DefaultMaxOutputBytes.
func (t *Transform) LimitOutputBytes(n int64) { t.maxBytes = n }

// New compiles s.Expr. A program that is empty or does not compile is a
// *settings.Error naming EXPR.
func New(s *Settings) (transform.Transform, error) {
	p, err := Compile(s.Expr)
	if err != nil {
		return nil, ExprError("EXPR", s.Expr, err)
	}
	t := &Transform{prog: p, maxBytes: transform.DefaultMaxOutputBytes, slow: s.Fast.Off}
	if !t.slow {
		t.fast = newFastPath(p)
	}
	return t, nil
}

// ExprError is the setting error for a jq program in setting field that is
// empty or does not compile with err (transforms that take a jq program
// share it).
func ExprError(field, expr string, err error) *settings.Error {
	if expr == "" {
		return transform.Missing(field, "")
	}
	return transform.Invalid(field, expr, " ("+err.Error()+")")
}

// Process runs the program on rec's value and appends one record per
// result: the first is rec itself, the others new records with rec's key,
// a copy of its headers, its timestamp and topic. No result filters rec
// out. On error rec is left as it was.
func (t *Transform) Process(ctx context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	// Every output holds rec's key and headers besides its value.
	each := transform.Size(rec) - int64(len(rec.Value))
	if t.slow {
		return t.processSlow(ctx, rec, out, each)
	}
	text, iter, err := t.fast.run(ctx, t.prog, rec.Value, int(max(-1, min(t.maxBytes-each, math.MaxInt32))))
	switch {
	case err != nil:
		return out, err
	case iter == nil: // the identity program's output, from the text
		rec.Value = text
		return append(out, rec), nil
	}
	return t.emit(iter, rec, out, each)
}

// emit encodes the results of iter and appends one record per result to
// out: the first is rec itself, the others new records with rec's key, a
// copy of its headers, its timestamp and topic; each is what every
// output holds besides its value (key and headers). An error, too many results or too many bytes
// fail the record, which is then left as it was.
func (t *Transform) emit(iter gojq.Iter, rec *kgo.Record, out []*kgo.Record, each int64) ([]*kgo.Record, error) {
	t.results = t.results[:0]
	defer t.fast.enc.reset()
	var total int64
	for {
		r, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := r.(error); isErr {
			clear(t.results)
			return out, RunError(err)
		}
		if len(t.results) == MaxResults {
			clear(t.results)
			return out, fmt.Errorf("the jq program produced more than %d results for one record", MaxResults)
		}
		room := max(-1, min(t.maxBytes-total-each, math.MaxInt32))
		b, err := t.encode(r, int(room))
		if err != nil {
			clear(t.results)
			if errors.Is(err, errTooLarge) {
				// The encoding stopped once it was sure to need more
				// than room bytes.
				return out, &transform.OutputLimitError{Limit: t.maxBytes, Bytes: total + each + max(int64(len(b)), room+1), Records: len(t.results) + 1}
			}
			return out, fmt.Errorf("encoding a jq result as JSON: %w", err)
		}
		total += each + int64(len(b))
		t.results = append(t.results, bytes.Clone(b))
	}
	for i, b := range t.results {
		if i == 0 {
			rec.Value = b
			out = append(out, rec)
			continue
		}
		out = append(out, &kgo.Record{Key: rec.Key, Value: b, Headers: slices.Clone(rec.Headers), Timestamp: rec.Timestamp, Topic: rec.Topic})
	}
	clear(t.results) // drop references to the values
	return out, nil
}

// Program is a compiled jq program for record values. The route
// transform uses it too.
type Program struct {
	code *gojq.Code
	// identity is set for the program ".", which yields its input: it
	// does not run in gojq, whose environment and stacks cost six
	// allocations per run.
	identity bool
	// steps are the program's leading assignments and deletions, run
	// with one copy of the record (steps.go); nil when it has none.
	steps *steps
}

// Compile parses and compiles a jq program. The environment is hidden
// from it and it cannot import modules. Errors are one line.
func Compile(expr string) (*Program, error) {
	if expr == "" {
		return nil, errors.New("the program is empty")
	}
	q, err := gojq.Parse(expr)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%v at offset %d", err, pe.Offset)
		}
		return nil, err
	}
	noEnv := gojq.WithEnvironLoader(func() []string { return nil })
	code, err := gojq.Compile(q, noEnv)
	if err != nil {
		return nil, err
	}
	p := &Program{code: code, identity: reflect.DeepEqual(*q, identityQuery)}
	if !p.identity {
		p.steps = splitSteps(q, noEnv)
	}
	return p, nil
}

// identityQuery is the parse of ".", the program that yields its input.
// A program equal to it in every field, and only such a program, is run
// without gojq.
var identityQuery = gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeIdentity}}

// Run runs the program on v, a value from ParseValue, which it does not
// change. Errors come out of the iterator as values of type error.
func (p *Program) Run(ctx context.Context, v any) gojq.Iter {
	if p.identity {
		o := newOne(ctx, v)
		return &o
	}
	if p.steps != nil {
		if it, ok := p.steps.run(ctx, v, false); ok {
			return it
		}
	}
	return p.code.RunWithContext(ctx, v)
}

// runOwn is Run on a value that nothing else refers to, such as a fresh
// parse: the steps change it in place instead of copying it. Not ok when
// the steps cannot decide it; the value is then spent, and the caller
// runs the whole program (p.code) on a new parse of the same input.
func (p *Program) runOwn(ctx context.Context, v any) (gojq.Iter, bool) {
	if p.steps == nil {
		return p.Run(ctx, v), true
	}
	return p.steps.run(ctx, v, true)
}

// one is what gojq yields for ".": the input, or the context's error
// if it is done, as gojq checks it before its first step.
type one struct {
	v  any
	ok bool
}

func newOne(ctx context.Context, v any) one {
	if err := ctx.Err(); err != nil {
		return one{err, true}
	}
	return one{v, true}
}

// Next implements gojq.Iter.
func (o *one) Next() (any, bool) {
	v, ok := o.v, o.ok
	*o = one{}
	return v, ok
}

// RunError wraps an error the program produced for a record: it names jq
// and keeps a cancelled context visible to errors.Is, so that a shutdown
// is not mistaken for a failing record.
func RunError(err error) error {
	return fmt.Errorf("jq: %w", err)
}

// Touches returns the value: the program reads and writes values only,
// and keys pass through it as they are.
func (t *Transform) Touches() transform.Parts { return transform.PartValue }
