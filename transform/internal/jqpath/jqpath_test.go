package jqpath

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/itchyny/gojq"
)

// Const takes exactly the paths of constant keys, and nothing that only
// looks like one.
func TestConst(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{".a", []string{"a"}}, {".a.b", []string{"a", "b"}}, {`."a b"`, []string{"a b"}},
		{`."a".b.c`, []string{"a", "b", "c"}}, {`.""`, []string{""}},
		{".", nil}, {"..", nil}, {".a?", nil}, {".a.b?", nil}, {".a[]", nil}, {".a[0]", nil},
		{`.["a"]`, nil}, {`."\(.a)"`, nil}, {".a | .b", nil}, {".a, .b", nil}, {".a // 1", nil},
		{".a as $x | $x", nil}, {"def f: 1; .a", nil}, {`include "m"; .a`, nil}, {"module {}; .a", nil},
		{".a[1:2]", nil}, {"(.a)", nil}, {"$__loc__", nil}, {"a", nil},
	} {
		q, err := gojq.Parse(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, ok := Const(q)
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("Const(%s) = %q, %v; want %q", c.expr, got, ok, c.want)
		}
	}
}

// randomValue is a random value as gojq takes it, over the keys a, b and
// "", nested to depth.
func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(8); {
	case depth > 0 && n < 4:
		m := map[string]any{}
		for range r.IntN(3) {
			m[[]string{"a", "b", ""}[r.IntN(3)]] = randomValue(r, depth-1)
		}
		return m
	case depth > 0 && n == 4:
		return []any{randomValue(r, depth-1)}
	case n == 5:
		return "a"
	case n == 6:
		return 1.5
	}
	return nil
}

// Differential: where Get answers, it gives gojq's one result; where it
// does not, gojq fails.
func TestGetAsGojq(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 7))
	for _, expr := range []string{".a", ".b", `.""`, ".a.b", ".a.a.b", `.b."".a`} {
		q, err := gojq.Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		path, ok := Const(q)
		if !ok {
			t.Fatalf("%s: not a constant path", expr)
		}
		code, err := gojq.Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		answered, refused := 0, 0
		for range 3000 {
			v := randomValue(r, 3)
			got, ok := Get(v, path)
			it := code.Run(v)
			want, _ := it.Next()
			_, isErr := want.(error)
			switch {
			case ok && (isErr || !reflect.DeepEqual(got, want)):
				t.Fatalf("%s on %#v: %#v; gojq: %#v", expr, v, got, want)
			case !ok && !isErr:
				t.Fatalf("%s on %#v: not answered; gojq: %#v", expr, v, want)
			case ok:
				answered++
			default:
				refused++
			}
		}
		if answered == 0 || refused == 0 {
			t.Fatalf("%s: %d answered, %d refused: the values do not try both", expr, answered, refused)
		}
	}
}
