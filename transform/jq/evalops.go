package jq

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/itchyny/gojq"
)

// The operations of the direct subset (eval.go): each gives gojq's value
// where it can be sure of it and declines the rest.

// funcs are the functions of the subset without arguments.
var funcs = map[string]func(any) (any, bool){
	"length":         length,
	"not":            func(v any) (any, bool) { return !truthy(v), true },
	"type":           func(v any) (any, bool) { return gojq.TypeOf(v), true },
	"tostring":       tostring,
	"tonumber":       tonumber,
	"ascii_downcase": asciiCase('A', 'Z', 'a'-'A'),
	"ascii_upcase":   asciiCase('a', 'z', 'A'-'a'),
}

// funcs1 are the functions of the subset with one argument, given its
// value.
var funcs1 = map[string]func(v, x any) (any, bool){
	"ltrimstr": trimmer(strings.TrimPrefix),
	"rtrimstr": trimmer(strings.TrimSuffix),
	"join":     join,
}

// call is a call of a function of the subset; the program defines no
// functions (native declines definitions), so the names are gojq's
// built-ins. An argument runs on the call's input, as gojq's do.
func call(f *gojq.Func) expr {
	switch len(f.Args) {
	case 0:
		if fn := funcs[f.Name]; fn != nil {
			return func(in any) (any, bool) { return fn(in) }
		}
	case 1:
		fn, arg := funcs1[f.Name], native(f.Args[0])
		if fn != nil && arg != nil {
			return func(in any) (any, bool) {
				x, ok := arg(in)
				if !ok {
					return nil, false
				}
				return fn(in, x)
			}
		}
	}
	return nil
}

// truthy is jq's truth: everything but null and false.
func truthy(v any) bool { return v != nil && v != false }

// number is v as gojq's arithmetic sees it (an int or a float64, the text
// of a json.Number read as gojq reads it); not ok for what is not a number
// or is a big integer.
func number(v any) (any, bool) {
	switch n := v.(type) {
	case int, float64:
		return n, true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return int(i), true
		}
		if strings.ContainsAny(string(n), ".eE") {
			if f, err := n.Float64(); err == nil {
				return f, true
			}
		}
	}
	return nil, false
}

// binops are the binary operators of the subset.
var binops = map[gojq.Operator]func(l, r any) (any, bool){
	gojq.OpAdd: plus,
	gojq.OpSub: arith(func(l, r int) (any, bool) {
		v := l - r
		return v, (v <= l) == (r >= 0)
	}, func(l, r float64) any { return l - r }),
	gojq.OpMul: arith(func(l, r int) (any, bool) {
		v := l * r
		return v, r != -1 && (r == 0 || v/r == l)
	}, func(l, r float64) any { return l * r }),
	gojq.OpDiv: arith(func(l, r int) (any, bool) {
		if r == 0 || r == -1 {
			return nil, false
		}
		if l%r == 0 {
			return l / r, true
		}
		return float64(l) / float64(r), true
	}, func(l, r float64) any {
		if r == 0 {
			return nil
		}
		return l / r
	}),
	gojq.OpMod: arith(func(l, r int) (any, bool) {
		if r == 0 || r == -1 {
			return nil, false
		}
		return l % r, true
	}, func(float64, float64) any { return nil }),
	gojq.OpEq: compare(func(c int) bool { return c == 0 }),
	gojq.OpNe: compare(func(c int) bool { return c != 0 }),
	gojq.OpGt: compare(func(c int) bool { return c > 0 }),
	gojq.OpLt: compare(func(c int) bool { return c < 0 }),
	gojq.OpGe: compare(func(c int) bool { return c >= 0 }),
	gojq.OpLe: compare(func(c int) bool { return c <= 0 }),
}

// arith is an arithmetic operator on two numbers: onInts when both are
// ints (not ok on overflow and the cases gojq turns into big integers or
// errors), onFloats otherwise (nil: declined). Other operands decline.
func arith(onInts func(l, r int) (any, bool), onFloats func(l, r float64) any) func(l, r any) (any, bool) {
	return func(l, r any) (any, bool) {
		x, ok := number(l)
		if !ok {
			return nil, false
		}
		y, ok := number(r)
		if !ok {
			return nil, false
		}
		a, aInt := x.(int)
		b, bInt := y.(int)
		if aInt && bInt {
			return onInts(a, b)
		}
		v := onFloats(float64From(x), float64From(y))
		return v, v != nil
	}
}

// float64From is the float64 of an int or a float64.
func float64From(v any) float64 {
	if i, ok := v.(int); ok {
		return float64(i)
	}
	return v.(float64)
}

// plus is +: numbers, strings joined, null the other operand (a number
// as gojq reads it).
func plus(l, r any) (any, bool) {
	if s, ok := l.(string); ok {
		t, ok := r.(string)
		if ok && len(s)+len(t) <= nativeMaxString {
			return s + t, true
		}
		if r != nil {
			return nil, false
		}
	}
	if l == nil || r == nil {
		v := l
		if l == nil {
			v = r
		}
		if _, isNumber := v.(json.Number); isNumber {
			return number(v)
		}
		return v, true
	}
	return arith(func(l, r int) (any, bool) {
		v := l + r
		return v, (v >= l) == (r >= 0)
	}, func(l, r float64) any { return l + r })(l, r)
}

// compare is a comparison by gojq's own order of values.
func compare(holds func(int) bool) func(l, r any) (any, bool) {
	return func(l, r any) (any, bool) { return holds(gojq.Compare(l, r)), true }
}

// negateNumber is unary minus on a number: gojq turns a json.Number's
// sign in its text.
func negateNumber(v any) (any, bool) {
	switch n := v.(type) {
	case int:
		return -n, n != math.MinInt
	case float64:
		return -n, true
	case json.Number:
		if strings.HasPrefix(string(n), "-") {
			return n[1:], true
		}
		return "-" + n, true
	}
	return nil, false
}

// length is jq's length of null, a number, a string, an array or an
// object.
func length(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return 0, true
	case int:
		if x < 0 {
			return -x, x != math.MinInt
		}
		return x, true
	case float64:
		return math.Abs(x), true
	case json.Number:
		if strings.HasPrefix(string(x), "-") {
			return x[1:], true
		}
		return x, true
	case string:
		return utf8.RuneCountInString(x), true
	case []any:
		return len(x), true
	case map[string]any:
		return len(x), true
	}
	return nil, false
}

// scalarText is the text tostring and join give null, a boolean, an int,
// a json.Number or a string; not ok for other values.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "null", true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case json.Number:
		return string(x), true
	case string:
		return x, true
	}
	return "", false
}

// tostring is jq's tostring of a scalar (floats, arrays and objects
// decline).
func tostring(v any) (any, bool) {
	s, ok := scalarText(v)
	return s, ok
}

// tonumber is jq's tonumber of a number (itself) or of a string that is a
// plain integer of at most 18 digits; other strings decline.
func tonumber(v any) (any, bool) {
	switch x := v.(type) {
	case int, float64, json.Number:
		return x, true
	case string:
		digits := strings.TrimPrefix(x, "-")
		if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
			return nil, false
		}
		for i := 0; i < len(digits); i++ {
			if digits[i] < '0' || digits[i] > '9' {
				return nil, false
			}
		}
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return nil, false
}

// asciiCase maps the ASCII letters from lo to hi by delta in a string.
func asciiCase(lo, hi, delta rune) func(any) (any, bool) {
	return func(v any) (any, bool) {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		return strings.Map(func(r rune) rune {
			if lo <= r && r <= hi {
				return r + delta
			}
			return r
		}, s), true
	}
}

// trimmer is ltrimstr or rtrimstr by trim, on two strings.
func trimmer(trim func(s, t string) string) func(v, x any) (any, bool) {
	return func(v, x any) (any, bool) {
		s, ok := v.(string)
		t, ok2 := x.(string)
		if !ok || !ok2 {
			return nil, false
		}
		return trim(s, t), true
	}
}

// join is jq's join of an array of scalars with a string separator: null
// elements give the empty string.
func join(v, x any) (any, bool) {
	vs, ok := v.([]any)
	sep, ok2 := x.(string)
	if !ok || !ok2 {
		return nil, false
	}
	var b strings.Builder
	for i, e := range vs {
		if i > 0 {
			b.WriteString(sep)
		}
		if e == nil {
			continue
		}
		s, ok := scalarText(e)
		if !ok {
			return nil, false
		}
		b.WriteString(s)
		if b.Len() > nativeMaxString {
			return nil, false
		}
	}
	return b.String(), true
}
