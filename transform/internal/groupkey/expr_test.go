package groupkey

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform/jq"
)

// randomJSON returns a random JSON text over the keys a, b, "a b" and "",
// nested to depth: objects (mostly), arrays, strings, numbers, booleans
// and null.
func randomJSON(r *rand.Rand, depth int) string {
	switch n := r.IntN(10); {
	case depth > 0 && n < 5:
		var b strings.Builder
		b.WriteByte('{')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote([]string{"a", "b", "a b", ""}[r.IntN(4)]) + ":" + randomJSON(r, depth-1))
		}
		return b.String() + "}"
	case depth > 0 && n == 5:
		return "[" + randomJSON(r, depth-1) + "]"
	case n == 6:
		return strconv.Quote([]string{"x", "1", "a"}[r.IntN(3)])
	case n == 7:
		return []string{"1", "-0", "1.50", "1e2", "12345678901234567890"}[r.IntN(5)]
	case n == 8:
		return []string{"true", "false"}[r.IntN(2)]
	}
	return "null"
}

// Differential: Expr.First gives gojq's first result or error on random
// values, for paths it reads directly and for expressions it leaves to
// gojq; and it reads the paths directly.
func TestExprAsGojq(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 3))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		expr   string
		direct bool
	}{
		{".a", true}, {".a.b", true}, {`."a b"`, true}, {`."a".b.a`, true}, {`.""`, true},
		{".a?", false}, {".a[0]", false}, {".[]", false}, {".a | .b", false}, {`."\(.a)"`, false},
		{".a[]", false}, {`.["a"]`, false}, {".a // 1", false}, {".", false}, {"..", false}, {".a.b?", false},
	} {
		e, err := CompileExpr(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if (e.path != nil) != c.direct {
			t.Errorf("%s: read directly: %v, want %v", c.expr, e.path != nil, c.direct)
		}
		p, _ := jq.Compile(c.expr)
		for i := range 3000 {
			text := randomJSON(r, 3)
			v, err := jq.ParseValue([]byte(text))
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			ctx := context.Background()
			if i%100 == 0 {
				ctx = cancelled
			}
			got, gerr := e.First(ctx, v)
			want, werr := First(ctx, p, v)
			if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s on %s: %#v, %v; gojq: %#v, %v", c.expr, text, got, gerr, want, werr)
			}
		}
	}
}

// keyJSON writes what json.Marshal writes, for strings of every byte
// that matters to encoding/json and for the other kinds of BY result.
func TestKeyJSONAsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 5))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "<", ">", "&", "\x00", "\x1f", "\x7f", "é", "\u2028", "\xff", "/", "'"}
	values := []any{json.Number("12"), json.Number("1e2"), nil, true, 1.5, map[string]any{"a": "<"}, []any{"x"}}
	for range 5000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		values = append(values[:7], b.String())
		for _, v := range values {
			got, gerr := keyJSON(v)
			want, werr := json.Marshal(v)
			if string(got) != string(want) || (gerr == nil) != (werr == nil) {
				t.Fatalf("keyJSON(%#v) = %q, %v; json.Marshal: %q, %v", v, got, gerr, want, werr)
			}
		}
	}
}
