package jq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
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
		} else if !safeText(expr) {
			return
		}
		if value == "" {
			value = gn.input()
		} else if len(value) > 2048 {
			return
		}
		checkDiff(t, expr, value)
	})
}

// safeFuncs are the functions a program written as text may call: the
// generator's, and none that loops or builds large values (range,
// repeat, recurse, until, limit with a large count, ...).
var safeFuncs = map[string]bool{"limit": true, "ascii": true, "error": true, "empty": true, "$__loc__": true, "$ENV": true, "env": true}

func init() {
	for _, f := range append(genFuncs0, genFuncs1...) {
		safeFuncs[f] = true
	}
}

// safeText reports whether a program the fuzzer wrote as text, rather
// than through the generator, is bounded as the generator's are: known
// functions only, * and *= by a small literal only, at most one reduce or
// foreach, over limit(n; ...) with n at most 4, at most four tojson, and
// no function definitions. Programs that are not are skipped: a mutation
// such as "x" * 1e9 would take gigabytes in gojq.
func safeText(expr string) bool {
	q, err := gojq.Parse(expr)
	if err != nil || len(expr) > 400 {
		return false
	}
	ok, folds, tojson := true, 0, 0
	small := func(q *gojq.Query) bool {
		if q == nil || q.Term == nil || q.Term.Type != gojq.TermTypeNumber {
			return false
		}
		n, err := strconv.ParseFloat(q.Term.Number, 64)
		return err == nil && n <= 4
	}
	walkQuery(q, func(q *gojq.Query) {
		ok = ok && len(q.FuncDefs) == 0
		if q.Op == gojq.OpMul || q.Op == gojq.OpUpdateMul {
			ok = ok && (small(q.Right) || q.Op == gojq.OpMul && small(q.Left))
		}
	}, func(t *gojq.Term) {
		switch t.Type {
		case gojq.TermTypeFunc:
			ok = ok && (safeFuncs[t.Func.Name] || t.Func.Name[0] == '$')
			if t.Func.Name == "limit" {
				ok = ok && small(t.Func.Args[0])
			}
			if t.Func.Name == "tojson" {
				tojson++
			}
		case gojq.TermTypeReduce, gojq.TermTypeForeach:
			folds++
			src := t.Query
			if t.Foreach != nil {
				src = t.Foreach.Query
			}
			if t.Reduce != nil {
				src = t.Reduce.Query
			}
			ok = ok && src != nil && src.Term != nil && src.Term.Type == gojq.TermTypeFunc && src.Term.Func.Name == "limit"
		case gojq.TermTypeFormat, gojq.TermTypeRecurse:
			ok = false
		}
	})
	return ok && folds <= 1 && tojson <= 4
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	o := collect(func() gojq.Iter { return code.RunWithContext(ctx, v) })
	// The transform fails outputs past its limits, gojq does not.
	return o, ctx.Err() == nil && o.err != errTooMuch
}

// errTooMuch ends a collection of more than a MiB or MaxResults results.
const errTooMuch = "too much"

// collect runs the iterator run returns to its end or first error.
func collect(run func() gojq.Iter) (o outcome) {
	size := 0
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
		if size += len(b); size >= 1<<20 || len(o.results) >= MaxResults {
			// Past the transform's limits: the caller skips the case.
			o.err = errTooMuch
			return o
		}
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
	outs, err := tr.Process(context.Background(), record.Source{Topic: "t"}, rec, nil)
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

// Every seed of FuzzJQDiff is run, not skipped as unbounded: the
// programs of stepPrograms and of the checked-in corpus pass safeText.
func TestDiffSeedsRun(t *testing.T) {
	exprs := append([]string(nil), stepPrograms...)
	files, err := filepath.Glob("testdata/fuzz/FuzzJQDiff/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[2], "string(") {
			t.Fatalf("%s: not a case of FuzzJQDiff", f)
		}
		expr, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		exprs = append(exprs, expr)
	}
	for _, expr := range exprs {
		if !safeText(expr) {
			t.Errorf("%s: skipped by safeText", expr)
		}
	}
}
