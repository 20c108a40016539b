package groupkey

import (
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform/jq"
)

// pickExprs are the expression sets the pick tests read values with:
// paths Picker picks for, and sets with one it does not.
var pickExprs = [][]string{
	{".amount", ".customer"},
	{".a"},
	{".a.b", `."a b"`},
	{".amount", ".a.b.c"},
	{".customer", ".a | .b"},
}

// pickDoc returns a random text near an order: an object with the
// picked names (sometimes twice, sometimes escaped, sometimes missing)
// among others, of every kind of value; and now and then one of the
// texts the scan must leave to the full parse.
func pickDoc(r *rand.Rand) string {
	if r.IntN(10) == 0 {
		return []string{`[1]`, `"x"`, `null`, `1`, ``, ` `, `{`, `{}`, `{"a":1}x`, `{"a":1}}`, `{"a" 1}`, `{"a":1,}`, `{,"a":1}`,
			`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":tru}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", `{"a":"\ud800"}`,
			`{"a\u0062":1}`, `{"a":1,"a":2}`, `{"amount":1,"amount":2}`, "\ufeff{\"a\":1}", `{"a":[1,2,{"b":[]}]}`, `{"a":{"b":{"c":null}}}`,
			` {"amount" : 1e2 , "customer" : "c\"1" } `, strings.Repeat("[", 600) + strings.Repeat("]", 600),
			`{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, `{"a":"é","b":"\u00e9"}`}[r.IntN(31)]
	}
	var b strings.Builder
	b.WriteByte('{')
	n := r.IntN(6)
	for i := range n {
		if i > 0 {
			b.WriteString([]string{",", " , ", ",\n"}[r.IntN(3)])
		}
		name := []string{`"amount"`, `"customer"`, `"a"`, `"a b"`, `"b"`, `"pad"`, `"amo\u0075nt"`, `"é"`, `""`}[r.IntN(9)]
		b.WriteString(name + ":" + randomJSON(r, 3))
	}
	if r.IntN(4) == 0 {
		b.WriteString(`,"amount":` + []string{"12", "-0", "1e2", "1.50", `"7"`, "null", `{"x":1}`}[r.IntN(7)])
		if n == 0 {
			return strings.Replace(b.String(), "{,", "{", 1) + "}"
		}
	}
	return b.String() + "}"
}

// sameValue reads doc through Picker.Parse and through jq.ParseValue with
// each expression of exprs and fails when an error or a result differs.
func sameValue(t testing.TB, exprs []string, doc string) {
	t.Helper()
	es := make([]*Expr, len(exprs))
	for i, x := range exprs {
		e, err := CompileExpr(x)
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	p := NewPicker(es...)
	got, gerr := p.Parse([]byte(doc))
	want, werr := jq.ParseValue([]byte(doc))
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("%q: parse %v, want %v", doc, gerr, werr)
	}
	if werr != nil {
		return
	}
	ctx := context.Background()
	for i, e := range es {
		r, err := e.First(ctx, got)
		wr, werr := First(ctx, e.prog, want)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) || !reflect.DeepEqual(r, wr) {
			t.Fatalf("%s of %q: %#v, %v; want %#v, %v", exprs[i], doc, r, err, wr, werr)
		}
	}
}

// Differential: whatever Picker picks, every expression reads from its
// value what it reads from the full parse, and Parse fails where the
// full parse fails, with its error; the scan picks for most orders.
func TestPickAsParse(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 4))
	picked := 0
	for i := range 20000 {
		exprs := pickExprs[i%len(pickExprs)]
		doc := pickDoc(r)
		sameValue(t, exprs, doc)
		if i%len(pickExprs) == 0 {
			e1, _ := CompileExpr(exprs[0])
			e2, _ := CompileExpr(exprs[1])
			if v, err := NewPicker(e1, e2).Parse([]byte(doc)); err == nil {
				if _, ok := v.(*Picked); ok {
					picked++
				}
			}
		}
	}
	t.Logf("%d of %d values picked", picked, 20000/len(pickExprs))
	if picked < 20000/len(pickExprs)/2 {
		t.Errorf("%d values picked: the scan refuses too much", picked)
	}
}

// FuzzPick holds Picker.Parse to jq.ParseValue on any text, for each
// expression set of pickExprs.
func FuzzPick(f *testing.F) {
	for _, s := range []string{`{"amount":12,"customer":"c-1","pad":"xxxx"}`, `{"a":{"b":[1,{"c":null}]},"a b":"\u00e9"}`,
		`{"amount":1,"amount":2}`, `{"a\u0062":1}`, "{\"a\":\"\xff\"}", ` {"amount" : -0.5e-3 } `, `[{"amount":1}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for _, exprs := range pickExprs {
			sameValue(t, exprs, doc)
		}
	})
}
