package jq

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/internal/sample"
	"github.com/streamproc/processor/transform/transformtest"
)

// fastCorpus are values the fast path must parse itself, without
// falling back to encoding/json.
var fastCorpus = []string{
	transformtest.Order256,
	string(sample.Order(7, 100, 100).Value),
	string(sample.Order(8, 100, 1024).Value),
	`null`, `true`, `false`, `0`, `-0`, `1.0`, `-1.5e-7`, `1e-7`, `1E+2`, `1e400`, `-1e400`,
	`9007199254740991`, `9007199254740992`, `9007199254740993`, `-9007199254740993`,
	`9223372036854775807`, `-9223372036854775808`, `9223372036854775808`, `-9223372036854775809`,
	`18446744073709551616`, `123456789012345678901234567890`, `0.1`, `5e-324`, `2.2250738585072014e-308`,
	`""`, `"plain"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u0000"`, `"\u001f"`, `"\u007f"`,
	`"\u00e9"`, `"é"`, `"日本語"`, `"\ud83d\ude00"`, `"😀"`, `"\u2028\u2029"`, `"<&>"`,
	`[]`, `{}`, `[[]]`, `[{}]`, `{"a":{}}`, ` [1, 2 ,3 ] `, "\t\r\n{\"a\" : 1}\n",
	`{"a":1,"a":2}`, `{"b":1,"a":2,"c":{"z":[1,{"y":null}],"x":"w"}}`, `{"":""}`, `{"\u0061":1,"a":2}`,
	`{"id": 12345678901234567890, "amount_cents": 250, "b": true, "a": [1.5, null]}`,
	"1 \t\n", "{}\n\n",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat(`{"a":`, 9999) + `{}` + strings.Repeat("}", 9999),
	`{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18}`,
}

// otherCorpus are values that are not JSON, or that encoding/json repairs
// or allows where the fast path does not: the fallback answers them.
var otherCorpus = []string{
	``, ` `, `nul`, `tru`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `[1 2]`, `01`, `-`, `1.`, `.5`, `+1`, `0x10`, `NaN`, `Infinity`,
	`"\x"`, `"\u12"`, "\"a\x01\"", `"unterminated`, `{"a":1`, `[`, `]`, `}`, `{1:2}`, `'a'`,
	`1 x`, `1x`, `{"a":1}x`, `{"a":1} {"b":2}`, `[] []`, `"a""b"`,
	"1\v", "1\f", "{}\u00a0", "{}\u0085", "{}\u2003", "\ufeff1", "\u00a01",
	"\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "{\"\xff\":1}",
	`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`, `"\udc00\ud800"`, `{"\ud800":1}`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + `{}` + strings.Repeat("}", 10000),
}

// programs run on both parses: their results and encodings must match.
var programs = []string{
	".", ".amount_cents *= 2", "{order_id, amount_cents}", `select(.status == "cancelled")`,
	"[.. | numbers]", "[.. | strings]", "[paths]", "tojson", "[.. | numbers | . + 0]", "[.. | numbers | tostring]",
	"[.. | select(type == \"number\") | . * 1]", "keys? // .", "to_entries? // .", ".[]? // .",
	"[.. | numbers] | sort", "[.. | numbers] | add", "[.. | numbers | floor? // .]",
}

// TestParseDifferential checks the fast path against encoding/json's
// on both corpora: where the fast path answers, encoding/json gives the
// same value; the answer of ParseValue (value or error text) is always
// encoding/json's; and programs give the same results and bytes.
func TestParseDifferential(t *testing.T) {
	for _, in := range fastCorpus {
		if _, ok := new(parser).fast([]byte(in)); !ok {
			t.Errorf("%.60q: fell back to encoding/json", in)
		}
		checkParse(t, []byte(in))
	}
	for _, in := range otherCorpus {
		checkParse(t, []byte(in))
	}
}

func checkParse(t *testing.T, b []byte) {
	t.Helper()
	var p parser
	orig := string(b)
	fast, ok := p.fast(b)
	if string(b) != orig {
		t.Fatalf("%.60q: the parse changed its input", orig)
	}
	want, wantErr := parseStd(b)
	if ok && wantErr != nil {
		t.Fatalf("%.60q: the fast path accepted what encoding/json refuses (%v)", b, wantErr)
	}
	if ok && !reflect.DeepEqual(fast, want) {
		t.Fatalf("%.60q: fast path %#v, encoding/json %#v", b, fast, want)
	}
	got, err := p.parse(b)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%.60q: parse gave %#v, %v; encoding/json %#v, %v", b, got, err, want, wantErr)
	}
	if ok {
		progs := programs
		if len(b) > 512 {
			progs = programs[:1] // [paths] is quadratic in the depth: the identity alone
		}
		for _, expr := range progs {
			checkProgram(t, expr, b, fast, want)
		}
	}
}

var compiled = map[string]*Program{}

// checkProgram runs expr on both values and encodes the results with the
// encoder and with the reference encoder: all four must agree.
func checkProgram(t *testing.T, expr string, b []byte, fast, want any) {
	t.Helper()
	prog := compiled[expr]
	if prog == nil {
		var err error
		if prog, err = Compile(expr); err != nil {
			t.Fatal(err)
		}
		compiled[expr] = prog
	}
	got, ref := results(t, prog, fast, false), results(t, prog, want, true)
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("%s on %.60q:\n got %q\nwant %q", expr, b, got, ref)
	}
}

// results are the encoded results or errors of prog on v, with the
// encoder or with gojq.Marshal, which it must match byte for byte.
func results(t *testing.T, prog *Program, v any, useRef bool) []string {
	t.Helper()
	var out []string
	var e encoder
	iter := prog.Run(context.Background(), v)
	for i := 0; i < 100; i++ {
		r, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := r.(error); isErr {
			out = append(out, "error: "+err.Error())
			break
		}
		var enc []byte
		var err error
		if useRef {
			enc, err = gojq.Marshal(r)
		} else {
			enc, err = e.encode(r, math.MaxInt32)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(enc))
	}
	return out
}

// FuzzParse holds the fast path to encoding/json's on random input:
// the same values where it answers, the same answer from ParseValue, the
// same results and bytes from programs.
func FuzzParse(f *testing.F) {
	for _, in := range fastCorpus[:len(fastCorpus)-3] {
		f.Add([]byte(in))
	}
	for _, in := range otherCorpus[:len(otherCorpus)-2] {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkParse(t, b) })
}

// TestParseNumbers pins what numbers become: json.Number with the text as
// written, whatever its size, and the same text on output.
func TestParseNumbers(t *testing.T) {
	tr := newJQ(t, ".")
	for _, n := range []string{"9007199254740993", "9223372036854775807", "-9223372036854775808",
		"18446744073709551616", "1e400", "1.0", "-0", "1e-7", "1E+2", "0.10"} {
		if got := run(t, tr, rec(`{"n":`+n+`}`)); len(got) != 1 || got[0] != `{"n":`+n+`}` {
			t.Errorf("%s came out as %q", n, got)
		}
	}
	cases := map[string]string{ // arithmetic sees them as gojq does
		"9007199254740993": "9007199254740994", "9223372036854775807": "9223372036854775808",
		"-9223372036854775808": "-9223372036854775807", "1e400": "1.7976931348623157e+308",
		"1.0": "2", "-0": "1", "1e-7": "1.0000001",
	}
	add := newJQ(t, ".n + 1")
	for n, want := range cases {
		if got := run(t, add, rec(`{"n":`+n+`}`)); len(got) != 1 || got[0] != want {
			t.Errorf("%s + 1 = %q, want %s", n, got, want)
		}
	}
}

// TestPlainWord holds the word-wide test to the byte table, for every byte
// at every place of a word and for random words.
func TestPlainWord(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			if got, want := plainWord(word(string(w))), plain[c]; got != want {
				t.Fatalf("byte %#x at %d: plainWord %v, want %v", c, pos, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		x := r.Uint64()
		want := true
		for i := range 8 {
			want = want && plain[byte(x>>(8*i))]
		}
		if plainWord(x) != want {
			t.Fatalf("%#x: plainWord %v, want %v", x, !want, want)
		}
	}
}
