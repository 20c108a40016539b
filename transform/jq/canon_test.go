package jq

import (
	"math"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform/transformtest"
)

// canonCorpus adds to the parse corpora values that exercise canon's
// sort, its choice among duplicate names and what it declines.
var canonCorpus = []string{
	`{"b":1,"a":2,"a":3}`, `{"a":{"y":1,"x":2,"y":3},"a":[{"d":1,"c":2}]}`,
	`{"k9":9,"k1":1,"k8":8,"k2":2,"k7":7,"k3":3,"k6":6,"k4":4,"k5":5,"k10":10,"k19":19,"k11":11,"k18":18,"k12":12,"k17":17,"k13":13,"k16":16,"k14":14,"k15":15,"k1":"last","k15":"again"}`,
	`{"ab":1,"a":2,"b":3,"":4,"aa":5}`, `{"é":1,"e":2,"z":3}`, ` { "a" : [ 1 , { "b" : null } ] } `,
	`{"a":"\n"}`, `{"\n":1}`, `{"a":"x` + "\x7f" + `"}`, `{"a":"<&>"}`, `"\u00e9"`, `[1e5,-0.0,0,1E-2]`,
	strings.Repeat("[", canonDepth) + strings.Repeat("]", canonDepth),
	strings.Repeat("[", canonDepth+1) + strings.Repeat("]", canonDepth+1),
	strings.Repeat(`{"a":`, canonDepth-1) + `{}` + strings.Repeat("}", canonDepth-1),
	strings.Repeat(`{"a":`, canonDepth) + `{}` + strings.Repeat("}", canonDepth),
}

// TestCanon holds canon to the parse and the encoder: where it answers,
// the value parses on the fast path and the encoder writes the same
// bytes; values it should answer, it does.
func TestCanon(t *testing.T) {
	answered := 0
	for _, corpus := range [][]string{fastCorpus, otherCorpus, canonCorpus} {
		for _, in := range corpus {
			if checkCanon(t, []byte(in), math.MaxInt32) {
				answered++
			}
		}
	}
	for _, in := range []string{transformtest.Order256, `{"b":1,"a":2,"a":3}`, " [1,2] ", `"é"`,
		strings.Repeat("[", canonDepth) + strings.Repeat("]", canonDepth)} {
		if !checkCanon(t, []byte(in), math.MaxInt32) {
			t.Errorf("%.60q: declined", in)
		}
	}
	for _, in := range []string{`"\n"`, `{"\u0061":1}`, "\"\x7f\"", "\"\xff\"", `01`, `{"a":1}x`,
		strings.Repeat("[", canonDepth+1) + strings.Repeat("]", canonDepth+1)} {
		if checkCanon(t, []byte(in), math.MaxInt32) {
			t.Errorf("%.60q: answered", in)
		}
	}
	if answered < 40 {
		t.Errorf("canon answered only %d values", answered)
	}
	// The limit: an encoding of exactly limit bytes is answered, one more
	// is not.
	in := []byte(`{"b":2, "a":1}`)
	if _, ok := new(canon).encode(in, len(`{"a":1,"b":2}`)); !ok {
		t.Error("declined an encoding at its limit")
	}
	if _, ok := new(canon).encode(in, len(`{"a":1,"b":2}`)-1); ok {
		t.Error("answered an encoding over its limit")
	}
}

// checkCanon reports whether canon answered b; if it did, its bytes must
// be those of the encoder on the fast parse of b.
func checkCanon(t *testing.T, b []byte, limit int) bool {
	t.Helper()
	orig := string(b)
	var c canon
	got, ok := c.encode(b, limit)
	if string(b) != orig {
		t.Fatalf("%.60q: canon changed its input", orig)
	}
	if !ok {
		return false
	}
	v, fast := new(parser).fast(b)
	if !fast {
		t.Fatalf("%.60q: canon answered %q, the fast parse declined", b, got)
	}
	want, err := new(encoder).encode(v, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%.60q: canon %q, encoder %q", b, got, want)
	}
	return true
}

// FuzzCanon holds canon to the parse and the encoder on random input.
func FuzzCanon(f *testing.F) {
	for _, corpus := range [][]string{fastCorpus[:len(fastCorpus)-3], otherCorpus[:len(otherCorpus)-2], canonCorpus} {
		for _, in := range corpus {
			f.Add([]byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkCanon(t, b, math.MaxInt32) })
}

// The identity program keeps a value that is already as the encoder
// writes it, without a copy, and writes any other afresh; the limit on
// the output and errors are as for any program.
func TestIdentityValue(t *testing.T) {
	tr := newJQ(t, ".")
	r := rec(`{"a":1,"b":[true,null]}`)
	in := r.Value
	out, err := tr.Process(t.Context(), src, r, nil)
	if err != nil || len(out) != 1 || &out[0].Value[0] != &in[0] {
		t.Fatalf("got %v, %v; want the input's own bytes", out, err)
	}
	r = rec(`{"b":1, "a":2}`)
	in = r.Value
	if got := run(t, tr, r); len(got) != 1 || got[0] != `{"a":2,"b":1}` || string(in) != `{"b":1, "a":2}` {
		t.Fatalf("got %q, input now %q", got, in)
	}
	for _, v := range []string{`{"a":1}x`, `{"a":`, "\"\xff\""} {
		want, wantErr := newJQ(t, ". | .").Process(t.Context(), src, rec(v), nil)
		got, err := tr.Process(t.Context(), src, rec(v), nil)
		if len(got) != len(want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%q: got %v, %v; gojq %v, %v", v, got, err, want, wantErr)
		}
		if len(got) == 1 && string(got[0].Value) != string(want[0].Value) {
			t.Errorf("%q: got %q, gojq %q", v, got[0].Value, want[0].Value)
		}
	}
}

// A large value does not leave canon holding its buffers: what it keeps
// between records is at most keepBuf bytes of output and scratch and
// keepStack members.
func TestCanonKeeps(t *testing.T) {
	tr := newJQ(t, ".")
	big := `{"b":[` + strings.Repeat(`{"y":1,"x":2},`, 20_000) + `{}],"a":1}`
	if got := run(t, tr, rec(big)); len(got) != 1 || !strings.HasPrefix(got[0], `{"a":1,"b":[{"x":2,"y":1},`) {
		t.Fatalf("got %.60q", got)
	}
	if c := tr.fast.canon; cap(c.out) > keepBuf || cap(c.tmp) > keepBuf || cap(c.members) > keepStack {
		t.Fatalf("kept %d bytes of output, %d of scratch, %d members", cap(c.out), cap(c.tmp), cap(c.members))
	}
	many := `{` + strings.Repeat(`"k":1,`, 2*keepStack) + `"z":[` + strings.Repeat(`1,`, 10) + `2]}`
	if got := run(t, tr, rec(many)); len(got) != 1 || got[0] != `{"k":1,"z":[1,1,1,1,1,1,1,1,1,1,2]}` {
		t.Fatalf("got %.60q", got)
	}
	if c := tr.fast.canon; cap(c.members) > keepStack {
		t.Fatalf("kept %d members", cap(c.members))
	}
}
