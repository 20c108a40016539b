package jq

import (
	"context"
	"testing"

	"github.com/itchyny/gojq"
)

// gojqBugs are programs gojq 0.12.20 gets wrong (gojqbug.go), with the
// value they run on and jq's answer, which gojq does not give.
var gojqBugs = []struct{ expr, in, jq string }{
	{`(.b or false | 1) + 0`, `{"b":true}`, `1`},
	{`{x: (.b or false | 1)}`, `{"b":true}`, `{"x":1}`},
	{`.z += (if .b then 1 else 2 end | 3)`, `{"b":true}`, `{"b":true,"z":3}`},
	{`."a" += (if 2 then false else 1 end | ["007"])`, `{}`, `{"a":["007"]}`},
	// The identity between the two sides compiles to nothing.
	{`.A+=(0 or .A000|.|0)`, `null`, `{"A":0}`},
	{`.A += ((0 or .x | .) | 0)`, `{}`, `{"A":0}`},
	{`.A += (0 or .x | (.) | . | 0)`, `{}`, `{"A":0}`},
	{`{x: (.b or false | . | 1)}`, `{"b":true}`, `{"x":1}`},
}

// gojq still gets these programs wrong: when this fails, a gojq release
// fixed the bug, and the guard of gojqbug.go (with this test) can go.
// The fast path takes none of them, neither as steps nor in the direct
// subset, so that they give gojq's answer with PROCESSOR_JQ_FAST either
// way (FuzzJQDiff holds them in its corpus).
func TestGojqBranchedPipeBug(t *testing.T) {
	for _, c := range gojqBugs {
		q, err := gojq.Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ParseValue([]byte(c.in))
		if err != nil {
			t.Fatal(err)
		}
		code, err := gojq.Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		got := collect(func() gojq.Iter { return code.RunWithContext(context.Background(), v) })
		if got.err == "" && len(got.results) == 1 && got.results[0] == c.jq {
			t.Errorf("%s on %s: gojq gives jq's %s now; the guard of gojqbug.go may go", c.expr, c.in, c.jq)
		}
		if !branchedPipe(q) {
			t.Errorf("%s: not taken for a branched pipe", c.expr)
		}
		for _, prefix := range []string{"", ".y = 1 | "} {
			p, err := Compile(prefix + c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if p.steps != nil {
				t.Errorf("%s%s: takes the steps", prefix, c.expr)
			}
		}
	}
	for _, src := range []string{`(.b or false | 1) + 0`, `(if .b then 1 else 2 end | 3) * 2`, `.a // .b | "x"`} {
		q, err := gojq.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if native(q) != nil {
			t.Errorf("%s: the direct subset takes it", src)
		}
	}
	// Pipes of other shapes keep the fast path: the chain rows' program.
	if p, err := Compile(chainExpr); err != nil || p.steps == nil {
		t.Errorf("the chain rows' program does not take the steps: %v", err)
	}
}
