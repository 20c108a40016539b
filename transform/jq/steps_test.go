package jq

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// stepPrograms begin with steps; each runs through its steps and as one
// gojq program on stepInputs, and must give the same.
var stepPrograms = []string{
	chainExpr,
	`.a = 1 | .b = .a`,                         // b reads what a wrote: two steps, not a group
	`.a = 1 | .b = 2 | .c = (.a // "none")`,    // c reads a: a group of two, then one
	`.self = . | .x = 1`,                       // a value that refers to the object
	`.x = [.] | .y = 2 | .x[0].y`,              // the same inside an array, then a rest
	`.n.m = 1 | .n.k = 2 | .n`,                 // nested paths, objects created on the way
	`.a.b = 1 | .z = 0`,                        // a path through a value that may not be an object
	`.a = (1, 2) | .b = 3`,                     // several results
	`.a = empty | .b = 3`,                      // none
	`.a = error("boom") | .b = 3`,              // an error
	`.a |= empty | .b = 1`,                     // modify with no result
	`.a |= (. + 1, . + 2) | .b = 1`,            // modify takes the first
	`.a += 1 | .b -= 2 | .c *= 3`,              // updates, on missing keys too
	`.a //= "d" | .b = (.a | length)`,          // alternative update, then a read of it
	`del(.pad) | .pad_len = (.pad | length)`,   // a deletion, then a read of the key
	`del(.a, .b) | .c = 1`,                     // two keys deleted
	`."q k" = 1 | .r = ."q k"`,                 // quoted keys
	`.a = 1 | .b = 2 | select(.a == 1) | keys`, // a rest
	`.a = $ENV | .b = 1`,                       // a variable
	`.a = (.x as $v | $v) | .b = ([.y, "s\(.z)"] | join(","))`,
	`.a = (if .x then 1 elif .y then 2 else 3 end) | .b = (try .x.y catch "c")`,
	`.t = (.x | tostring) | .u = -.amount_cents | .v = .items[0]?`,
	`.seen = true`,       // a lone assignment in the subset of eval.go
	`.amount_cents *= 2`, // a lone update there
	`.a += .n | .s = (.a + .pad) | .x //= (.a > 3)`,    // updates and reads there, some declined
	`.c |= (. // 0) + 1 | .d = ([.a, .x] | join("-"))`, // modify there
	`.c = ((.c // 0) + 1) | .b = (.c, .y)`,             // several results after a change in place
	// Reads the read analysis once missed, which gave gojq's result on
	// the input before the earlier steps: a key read through an
	// interpolated path, an if without else (which yields its input).
	`.currency = (.currency | ascii_upcase) | .rate = .rates."\(.currency)"`,
	`.a = 1 | .b = (if .x then 2 end)`,
	`.a = 1 | .b = (if .x then 2 elif .y then 3 end)`,
	`.k = "c" | .v = .a["\(.k)"]`,
	`.a = 1 | .b = "\(.a)-\(.x)"`,
}

var stepInputs = []string{
	`{"order_id":"o-1","customer":"customer-42","amount_cents":12345,"seq":7,"pad":"xxxx"}`,
	`{"a":{"b":0},"x":true,"y":[1,2],"z":"q","items":[{"i":1}],"amount_cents":1e400}`,
	`{"a":5,"n":3,"x":null,"pad":null}`,
	`{"a":"s","b":[1],"c":{"d":1}}`,
	`{}`, `null`, `[1,2]`, `"str"`, `7`,
	`{"currency":"eur","rates":{"EUR":1.1,"eur":2}}`,
}

// iterResults is every result of it, each as JSON or as its error's text.
func iterResults(t *testing.T, it gojq.Iter) string {
	t.Helper()
	var out []string
	for {
		v, ok := it.Next()
		if !ok {
			return strings.Join(out, "\n")
		}
		if err, isErr := v.(error); isErr {
			out = append(out, "error: "+err.Error())
			continue
		}
		b, err := gojq.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
}

// Programs that begin with steps give through them what gojq gives for
// the whole program, results and errors, and leave their input as it was.
func TestStepsAsGojq(t *testing.T) {
	var ps parser
	for _, expr := range stepPrograms {
		p, err := Compile(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if p.steps == nil {
			t.Errorf("%s: not run through steps", expr)
			continue
		}
		for _, in := range stepInputs {
			want := func() string {
				v, err := ps.parse([]byte(in))
				if err != nil {
					t.Fatal(err)
				}
				return iterResults(t, p.code.RunWithContext(context.Background(), v))
			}()
			v, err := ps.parse([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			before := iterResults(t, newIter(v))
			if got := iterResults(t, p.Run(context.Background(), v)); got != want {
				t.Errorf("%s on %s:\n got %s\nwant %s", expr, in, got, want)
			}
			if after := iterResults(t, newIter(v)); after != before {
				t.Errorf("%s on %s changed its input to %s", expr, in, after)
			}
		}
	}
}

func newIter(v any) gojq.Iter {
	o := one{v, true}
	return &o
}

// The steps are grouped where a right-hand side reads only keys no
// earlier assignment of the group wrote, and the chain rows' program is
// one group of five and a deletion.
func TestStepGroups(t *testing.T) {
	for expr, want := range map[string]string{
		chainExpr:                            "[5 1]",
		`.a = 1 | .b = .a`:                   "[1 1]",
		`.a = 1 | .b = 2 | .c = (.a // "x")`: "[2 1]",
		`.a = . | .b = 1`:                    "[1 1]",
		`.a = (.x | keys) | .b = length`:     "[1 1]",
		`.a = 1 | .b = {c: .c}`:              "[1 1]",
		`.a.b = .x | .c = .a`:                "[1 1]",
		`.a = .x[.i] | .b = .y`:              "[2]",
		`.a |= 1 | .b = 1`:                   "[1 1]",
	} {
		p, err := Compile(expr)
		if err != nil || p.steps == nil {
			t.Fatalf("%s: %v, steps %v", expr, err, p.steps)
		}
		var sizes []int
		for _, s := range p.steps.list {
			sizes = append(sizes, max(len(s.paths), len(s.dels)))
		}
		if got := fmt.Sprint(sizes); got != want {
			t.Errorf("%s: steps of %s, want %s", expr, got, want)
		}
	}
}

// FuzzSteps runs the step programs through their steps and as gojq
// programs on random JSON values, and through the transform in place and
// as programs that do not take the steps: the same results and errors.
func FuzzSteps(f *testing.F) {
	for _, in := range stepInputs {
		f.Add([]byte(in))
	}
	var progs []*Program
	var steps, plain []transform.Transform
	for _, expr := range stepPrograms {
		p, err := Compile(expr)
		if err != nil {
			f.Fatal(err)
		}
		progs = append(progs, p)
		s, err := New(&Settings{Expr: expr})
		if err != nil {
			f.Fatal(err)
		}
		g, err := New(&Settings{Expr: "def _plain: .; " + expr})
		if err != nil {
			f.Fatal(err)
		}
		steps, plain = append(steps, s), append(plain, g)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		var ps parser
		for i, p := range progs {
			v, err := ps.parse(value)
			if err != nil {
				return
			}
			got := iterResults(t, p.Run(context.Background(), v))
			if want := iterResults(t, p.code.RunWithContext(context.Background(), v)); got != want {
				t.Fatalf("on %q:\n got %s\nwant %s", value, got, want)
			}
			// The transform, on its own parse changed in place.
			if got, want := processed(t, steps[i], string(value)), processed(t, plain[i], string(value)); got != want {
				t.Fatalf("transform on %q:\n got %s\nwant %s", value, got, want)
			}
		}
	})
}

// The transform runs the steps on its own parse of each value, in place,
// and a new parse when they cannot decide it: its outputs and errors are
// those of the same program run in gojq alone (a program that defines a
// function does not take the steps).
func TestStepsInPlaceAsGojq(t *testing.T) {
	for _, expr := range stepPrograms {
		steps, err := New(&Settings{Expr: expr})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := New(&Settings{Expr: "def _plain: .; " + expr})
		if err != nil {
			t.Fatal(err)
		}
		if plain.(*Transform).prog.steps != nil {
			t.Fatalf("%s: the plain program takes the steps", expr)
		}
		for _, in := range stepInputs {
			got, want := processed(t, steps, in), processed(t, plain, in)
			if got != want {
				t.Errorf("%s on %s:\n got %s\nwant %s", expr, in, got, want)
			}
		}
	}
}

// processed is tr's outputs for the value in, one per line, or its error.
func processed(t *testing.T, tr transform.Transform, in string) string {
	t.Helper()
	rec := &kgo.Record{Value: []byte(in)}
	outs, err := tr.Process(context.Background(), record.Source{Topic: "t"}, rec, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	var vs []string
	for _, o := range outs {
		vs = append(vs, string(o.Value))
	}
	return strings.Join(vs, "\n")
}
