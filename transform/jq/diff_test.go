package jq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// FuzzJQDiff holds the whole jq transform to plain gojq. Each case is a
// program and a JSON value: given as text (expr, value), or generated
// from the fuzz bytes gen by the grammar of diffgen_test.go where they are
// empty. The program runs four ways, which must agree byte for byte,
// outputs and error:
//
//   - plain gojq: the program compiled by gojq as it is, on the value as
//     encoding/json reads it (UseNumber), its results written by
//     gojq.Marshal, stopping at the first error;
//   - the transform (Process, the path records take: its own parse, the
//     steps and the direct subset changing it in place, its encoder);
//   - the transform with FAST=false (gojq alone, on encoding/json's parse,
//     written by gojq.Marshal);
//   - Program.Run on a parse (the steps copying), which must leave that
//     parse as it was.
//
// A panic inside gojq counts as a result ("panic: ..."): the fast paths
// must give it too, never a different answer. testdata/fuzz/FuzzJQDiff
// holds every divergence found so far; make fuzz runs the target for a
// bounded time in CI, from that corpus.
func FuzzJQDiff(f *testing.F) {
	for _, expr := range stepPrograms {
		f.Add([]byte(nil), expr, stepInputs[len(expr)%len(stepInputs)])
	}
	f.Add([]byte("\x03\x01\x00\x01\x02\x05\x07\x01\x02\x03\x04\x05\x06\x07\x08\x09"), "", "")
	f.Fuzz(func(t *testing.T, g []byte, expr, value string) {
		gn := &gen{b: g}
		if expr == "" {
			expr = gn.program()
		}
		if value == "" {
			value = gn.input()
		}
		checkDiff(t, expr, value)
	})
}

// checkDiff runs expr on value through gojq, the transform and
// Program.Run, and fails t where they differ. Programs gojq does not
// compile, values encoding/json does not read, and runs that time out are
// skipped.
func checkDiff(t *testing.T, expr, value string) {
	t.Helper()
	q, err := gojq.Parse(expr)
	if err != nil {
		return
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return
	}
	want, ok := plainGojq(code, value)
	if !ok {
		return
	}
	tr, err := New(&Settings{Expr: expr})
	if err != nil {
		t.Fatalf("%s: gojq compiles it, New: %v", expr, err)
	}
	if got := transformed(tr, value); got != want.transform() {
		t.Fatalf("transform: %s on %s\n got %s\nwant %s", expr, value, clip(got), clip(want.transform()))
	}
	slow, err := New(&Settings{Expr: expr, Fast: Fast{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := transformed(slow, value); got != want.transform() {
		t.Fatalf("transform, FAST=false: %s on %s\n got %s\nwant %s", expr, value, clip(got), clip(want.transform()))
	}
	p := tr.(*Transform).prog
	v, err := ParseValue([]byte(value))
	if err != nil {
		t.Fatalf("%s: encoding/json reads it, ParseValue: %v", value, err)
	}
	before, _ := gojq.Marshal(v)
	if got := collect(func() gojq.Iter { return p.Run(context.Background(), v) }); got.String() != want.String() {
		t.Fatalf("Program.Run: %s on %s\n got %s\nwant %s", expr, value, clip(got.String()), clip(want.String()))
	}
	if after, _ := gojq.Marshal(v); !bytes.Equal(before, after) {
		t.Fatalf("Program.Run: %s changed its input %s to %s", expr, clip(string(before)), clip(string(after)))
	}
}

// outcome is what a run gave: its results as gojq.Marshal writes them,
// then the error or panic that ended it, if any.
type outcome struct {
	results []string
	err     string // "error: ..." or "panic: ..."
}

func (o outcome) String() string {
	return strings.Join(append(o.results[:len(o.results):len(o.results)], o.err), "\n")
}

// transform is the outcome as the transform reports it: the outputs, or
// only the error (every output is dropped), wrapped as RunError does.
func (o outcome) transform() string {
	switch {
	case strings.HasPrefix(o.err, "error: "):
		return "error: " + RunError(errors.New(strings.TrimPrefix(o.err, "error: "))).Error()
	case o.err != "":
		return o.err
	}
	return strings.Join(o.results, "\n")
}

// plainGojq is code's outcome on value as encoding/json reads it; not ok
// when it does not read it, or the run takes too long.
func plainGojq(code *gojq.Code, value string) (outcome, bool) {
	dec := json.NewDecoder(strings.NewReader(value))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return outcome{}, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return outcome{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o := collect(func() gojq.Iter { return code.RunWithContext(ctx, v) })
	size := 0
	for _, r := range o.results {
		size += len(r)
	}
	// The transform fails outputs past its limits, gojq does not.
	return o, ctx.Err() == nil && len(o.results) < MaxResults && size < 1<<20
}

// collect runs the iterator run returns to its end or first error.
func collect(run func() gojq.Iter) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			o.err = fmt.Sprint("panic: ", r)
		}
	}()
	it := run()
	for {
		v, ok := it.Next()
		if !ok {
			return o
		}
		if err, isErr := v.(error); isErr {
			o.err = "error: " + err.Error()
			return o
		}
		b, err := gojq.Marshal(v)
		if err != nil {
			o.err = "marshal: " + err.Error()
			return o
		}
		o.results = append(o.results, string(b))
	}
}

// transformed is tr's outputs for value, one per line, or its error or
// panic.
func transformed(tr transform.Transform, value string) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprint("panic: ", r)
		}
	}()
	rec := &kgo.Record{Value: []byte(value)}
	outs, err := tr.Process(context.Background(), transform.Source{Topic: "t"}, rec, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	vs := make([]string, len(outs))
	for i, o := range outs {
		vs[i] = string(o.Value)
	}
	return strings.Join(vs, "\n")
}

// clip is s, cut short for a failure message.
func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}
