package jq

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// built is a chain of the jq transform alone, built as the processor
// builds it from its settings (defaults filled, values parsed): EXPR=expr,
// and FAST=fast unless fast is empty.
func built(t *testing.T, expr, fast string) (*transform.Chain, error) {
	t.Helper()
	spec, _ := transform.Default.Lookup("jq")
	reg := &transform.Registry{}
	reg.Register("jq", spec)
	lookup := func(_ transform.Entry, setting string) (string, bool) {
		switch setting {
		case "EXPR":
			return expr, true
		case "FAST":
			return fast, fast != ""
		}
		return "", false
	}
	return reg.Build([]transform.Entry{{Name: "jq"}}, lookup)
}

// slowInputs are values beyond stepInputs for FAST=false: a tombstone
// (nil), values that are not JSON, white space around a value, escapes,
// numbers of every text.
var slowInputs = [][]byte{
	nil, []byte(`not json`), []byte(`{"a":1} x`), []byte(" {\"a\" : [1, 2.50, -0, 1e1000]}\n"), []byte(`"\u00e9\ud83d\ude00\n"`),
	[]byte(`{"a":9007199254740993,"b":18446744073709551616,"c":5e-324,"d":0.1,"s":"007","x":"\u00e9"}`),
}

// FAST=false gives what the fast path gives (FAST unset, or true), outputs
// and errors, for programs that take the identity shortcut, the steps and
// the direct subset, and for programs that run in gojq either way; a
// FAST that is not a boolean is refused, naming FAST.
func TestFastOffAsOn(t *testing.T) {
	ins := slices2(slowInputs, stepInputs)
	for _, expr := range append([]string{".", ".items[]?", "{a, b: .x}", ".a += 1", "select(.a)", "error", ".[]"}, stepPrograms...) {
		var chains [3]*transform.Chain
		for i, fast := range []string{"", "true", "false"} {
			c, err := built(t, expr, fast)
			if err != nil {
				t.Fatal(err)
			}
			chains[i] = c
		}
		for _, in := range ins {
			want := processBytes(chains[0], in)
			if got := processBytes(chains[1], in); got != want {
				t.Errorf("%s on %q: FAST=true gives\n%s\nunset\n%s", expr, in, got, want)
			}
			if got := processBytes(chains[2], in); got != want {
				t.Errorf("%s on %q: FAST=false gives\n%s\nFAST=true\n%s", expr, in, got, want)
			}
		}
	}
	if _, err := built(t, ".", "maybe"); err == nil || !strings.Contains(err.Error(), "FAST") {
		t.Errorf("FAST=maybe: %v, want an error naming FAST", err)
	}
}

// FAST=false takes none of the fast path: with its parts made to answer
// wrongly (the identity shortcut and the steps set on a program that is
// neither, the parser's room), the outputs are still gojq's, while on the
// fast path the same sabotage shows.
func TestFastOffTakesGojq(t *testing.T) {
	const expr, in = `.a = 1 | .b = 2 | .c = (.a + .b)`, `{"a":5,"b":7}`
	const want = `{"a":1,"b":2,"c":3}`
	for _, off := range []bool{true, false} {
		tr, err := New(&Settings{Expr: expr, Fast: Fast{Off: off}})
		if err != nil {
			t.Fatal(err)
		}
		if got := processBytes(tr, []byte(in)); got != want {
			t.Fatalf("FAST off %v: %s, want %s", off, got, want)
		}
		p := tr.(*Transform).prog
		p.identity = true // the fast path would write the input as it is
		got := processBytes(tr, []byte(in))
		if off && got != want {
			t.Errorf("FAST=false took the identity shortcut: %s, want %s", got, want)
		}
		if !off && got != in {
			t.Errorf("the fast path ignored the sabotaged shortcut: %s", got)
		}
		p.identity = false
		p.steps = &steps{} // no steps, no rest: the fast path yields its input
		got = processBytes(tr, []byte(in))
		if off && got != want {
			t.Errorf("FAST=false took the steps: %s, want %s", got, want)
		}
		if !off && got != in {
			t.Errorf("the fast path ignored the sabotaged steps: %s", got)
		}
	}
}

// slices2 is a's values, then b's as bytes.
func slices2(a [][]byte, b []string) [][]byte {
	out := append([][]byte(nil), a...)
	for _, s := range b {
		out = append(out, []byte(s))
	}
	return out
}

// processBytes is tr's outputs for the value in (nil: a tombstone), one
// per line, or its error.
func processBytes(tr transform.Transform, in []byte) string {
	rec := &kgo.Record{Value: in}
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
