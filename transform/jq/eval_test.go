package jq

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/itchyny/gojq"
)

// nativeExprs are expressions of the subset evaluated directly.
var nativeExprs = []string{
	`.`, `.a`, `.a.b.c`, `."q k"`, `(.a).b`, `null`, `true`, `false`, `1`, `-1`, `1.5`, `1e3`,
	`100000000000000000000`, `"s"`, `"\u00fc\n"`,
	`.a + .b`, `.a - .b`, `.a * .b`, `.a / .b`, `.a % .b`, `-.a`, `-(.a)`,
	`.a + null`, `null + .a`, `null + null`, `.s + .t`, `.s + null`, `.s + .a`, `.y + .y`,
	`.a >= 5`, `.a == .b`, `.s < .t`, `.a != null`, `.a > .s`, `.y <= .m`, `.a == 1.0`,
	`if .a >= 50000 then "gold" elif .a >= 10000 then "silver" else "bronze" end`,
	`if .x then 1 end`, `if .x then .a elif .y then .b end`,
	`.customer | ltrimstr("customer-") | tonumber`, `.s | rtrimstr("x")`, `.s | ltrimstr(.t)`,
	`[.order_id, .customer, (.seq | tostring)] | join(":") | ascii_upcase`,
	`(.pad // "") | length`, `.a // .b // 3`,
	`.a and .b`, `.a or .b`, `.x and .nope.deeper`, `.a | not`, `.a | type`,
	`.y | length`, `.y | join("-")`, `.m | length`, `.s | length`, `.a | length`, `.y | join(.s)`,
	`[]`, `[.a]`, `[.a, .b, 1, "x"]`, `[.a, [.b]] | length`,
	`.s | ascii_downcase`, `.a | tostring`, `.y | tostring`, `.s | tonumber`, `.t | tonumber`,
	`.amount_cents / 100`, `.a * 2 + 1`, `(.a + .b) / (.a - .b)`,
}

// notNative are expressions outside the subset: gojq runs them.
var notNative = []string{
	`.a, .b`, `.x // empty`, `.[]`, `.[0]`, `.a?`, `.a[]`, `$ENV`, `$__loc__`, `empty`, `error("x")`,
	`"s\(.a)"`, `@base64`, `{a: 1}`, `.a as $x | $x`, `def f: 1; f`, `try .a`, `reduce .[] as $x (0; . + $x)`,
	`keys`, `.a = 1`, `.. | numbers`, `ltrimstr(.a; .b)`, `input`, `+.a`,
}

// nativeInputs are the values the expressions run on: big and exact
// numbers, numbers of every text, strings that are and are not numbers.
var nativeInputs = []string{
	`{"order_id":"o-1","customer":"customer-42","amount_cents":12345,"seq":7,"pad":"xxxx"}`,
	`{"a":5,"b":3,"s":"ab","t":"a","y":[1,"x",null,true],"m":{"k":1}}`,
	`{"a":9007199254740993,"b":-9223372036854775808,"s":"-12","t":"007"}`,
	`{"a":9223372036854775807,"b":1,"s":"12345678901234567890","t":"-0"}`,
	`{"a":-9223372036854775808,"b":-1}`,
	`{"a":1.5,"b":0,"s":"1e3","t":"+5"}`,
	`{"a":1e3,"b":2.5e-1,"s":"ü","t":"ü"}`,
	`{"a":7,"b":0}`, `{"a":-7,"b":2}`, `{"a":0,"b":-0}`, `{"a":1e400,"b":1}`,
	`{"a":"x","b":"y","s":"customer-x","t":null,"y":[[1]],"m":[]}`,
	`{"a":null,"b":null,"x":{"nope":{"deeper":1}},"y":[1.5]}`,
	`{"a":true,"b":false,"x":false,"pad":null}`,
	`{"a":{"b":{"c":[1]}},"q k":2,"customer":"customer-","seq":1e2}`,
	`{}`, `null`, `[1,2]`, `"str"`, `7`, `-3`, `true`,
}

// gojqOne is the single value gojq gives for q on v, or not ok when it
// gives an error, none or several.
func gojqOne(t *testing.T, q *gojq.Query, v any) (any, bool) {
	t.Helper()
	code, err := gojq.Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return only(code.RunWithContext(ctx, v))
}

// Whatever an expression of the subset decides is the one value gojq
// gives, of the same Go type; it decides the common cases; and what is
// outside the subset is not taken for it.
func TestNativeAsGojq(t *testing.T) {
	var ps parser
	decided := 0
	for _, src := range nativeExprs {
		q, err := gojq.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		e := native(q)
		if e == nil {
			t.Errorf("%s: not in the subset", src)
			continue
		}
		for _, in := range nativeInputs {
			v, err := ps.parse([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := e(v)
			if !ok {
				continue
			}
			decided++
			want, one := gojqOne(t, q, v)
			if !one || !reflect.DeepEqual(got, want) {
				t.Errorf("%s on %s: %#v, gojq %#v (one value: %v)", src, in, got, want, one)
			}
		}
	}
	t.Logf("decided %d of %d evaluations", decided, len(nativeExprs)*len(nativeInputs))
	if total := len(nativeExprs) * len(nativeInputs); decided < total/3 {
		t.Errorf("decided %d of %d evaluations", decided, total)
	}
	for _, src := range notNative {
		q, err := gojq.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if native(q) != nil {
			t.Errorf("%s: taken for the subset", src)
		}
	}
	// The chain rows' program: every right-hand side decided on an order.
	p, err := Compile(chainExpr)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ps.parse([]byte(nativeInputs[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range p.steps.list {
		if st.op == 0 {
			continue
		}
		if len(st.direct) != len(st.paths) {
			t.Fatalf("chain step %v: %d of %d right-hand sides in the subset", st.paths, len(st.direct), len(st.paths))
		}
		for i, e := range st.direct {
			if _, ok := e(v); !ok {
				t.Errorf("chain step %v declined on an order", st.paths[i])
			}
		}
	}
}

// FuzzNative evaluates random expressions on random values: where the
// subset decides, gojq gives that one value.
func FuzzNative(f *testing.F) {
	for i, src := range nativeExprs {
		f.Add(src, []byte(nativeInputs[i%len(nativeInputs)]))
	}
	f.Fuzz(func(t *testing.T, src string, value []byte) {
		q, err := gojq.Parse(src)
		if err != nil {
			return
		}
		e := native(q)
		if e == nil {
			return
		}
		if _, err := gojq.Compile(q); err != nil {
			return
		}
		var ps parser
		v, err := ps.parse(value)
		if err != nil {
			return
		}
		got, ok := e(v)
		if !ok {
			return
		}
		if want, one := gojqOne(t, q, v); !one || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s on %q: %#v, gojq %#v (one value: %v)", src, value, got, want, one)
		}
	})
}
