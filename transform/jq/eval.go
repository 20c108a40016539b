package jq

import (
	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/transform/internal/jqpath"
)

// The right-hand sides of a program's leading steps are mostly small
// expressions of the record's own fields: .amount_cents / 100, an if on a
// comparison, .customer | ltrimstr("customer-") | tonumber, a join. gojq
// runs them in its interpreter, which costs a new environment, a stack
// push and a check of the context per operation. The expressions here are
// evaluated directly on gojq's values instead, for a subset of jq where
// every part yields exactly one value:
//
//   - ., constant paths (.a, .a.b, ."a"), null, true, false, number and
//     string literals, parentheses, array construction [a, b, ...];
//   - a | b, a // b, and, or, if-elif-else, the comparisons and
//     + - * / % and unary minus;
//   - length, not, type, tostring, tonumber, ascii_downcase,
//     ascii_upcase, ltrimstr, rtrimstr, join.
//
// Each operation handles the cases whose result it can be sure of (gojq's
// own rules, see operator.go and func.go of gojq) and declines the rest: an
// error, a big integer, an overflow, a tonumber of anything but a plain
// integer, a type it does not handle. A declined evaluation is run by gojq, which then
// gives its own values and errors: the subset decides which records take
// the direct path, never what they yield. TestNativeAsGojq and FuzzNative
// hold the two to each other.

// expr is an expression of the subset: its value on in, or not ok when it
// declines.
type expr func(in any) (any, bool)

// nativeMaxString bounds a string that + or join builds here: a longer
// one is left to gojq.
const nativeMaxString = 1 << 20

// native is q as an expression of the subset; nil when q is not in it.
func native(q *gojq.Query) expr {
	if q == nil || len(q.FuncDefs) > 0 || len(q.Imports) > 0 || q.Meta != nil || len(q.Patterns) > 0 {
		return nil
	}
	if q.Term != nil {
		return nativeTerm(q.Term)
	}
	l, r := native(q.Left), native(q.Right)
	if l == nil || r == nil {
		return nil
	}
	switch q.Op {
	case gojq.OpPipe:
		if riskyPipe(q.Left, q.Right) { // gojqbug.go
			return nil
		}
		return func(in any) (any, bool) {
			v, ok := l(in)
			if !ok {
				return nil, false
			}
			return r(v)
		}
	case gojq.OpAlt:
		return func(in any) (any, bool) {
			v, ok := l(in)
			if !ok || truthy(v) {
				return v, ok
			}
			return r(in)
		}
	case gojq.OpAnd, gojq.OpOr:
		and := q.Op == gojq.OpAnd
		return func(in any) (any, bool) {
			v, ok := l(in)
			if !ok || truthy(v) != and {
				return !and, ok
			}
			if v, ok = r(in); !ok {
				return nil, false
			}
			return truthy(v), true
		}
	}
	if op := binops[q.Op]; op != nil {
		return func(in any) (any, bool) {
			x, ok := l(in)
			if !ok {
				return nil, false
			}
			y, ok := r(in)
			if !ok {
				return nil, false
			}
			return op(x, y)
		}
	}
	return nil
}

// nativeTerm is t as an expression of the subset; nil when it is not in it.
func nativeTerm(t *gojq.Term) expr {
	var e expr
	suffixes := t.SuffixList
	switch t.Type {
	case gojq.TermTypeIdentity:
		e = func(in any) (any, bool) { return in, true }
	case gojq.TermTypeIndex:
		k, ok := jqpath.Key(t.Index)
		if !ok {
			return nil
		}
		e = index(k)
	case gojq.TermTypeNull, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNumber:
		e = constant(t)
	case gojq.TermTypeString:
		if t.Str == nil || len(t.Str.Queries) > 0 || t.Format != "" {
			return nil
		}
		e = constant(t)
	case gojq.TermTypeQuery:
		e = native(t.Query)
	case gojq.TermTypeArray:
		e = array(t.Array.Query)
	case gojq.TermTypeIf:
		e = cond(t.If)
	case gojq.TermTypeFunc:
		e = call(t.Func)
	case gojq.TermTypeUnary:
		if t.Unary.Op == gojq.OpSub {
			if x := nativeTerm(t.Unary.Term); x != nil {
				e = func(in any) (any, bool) {
					v, ok := x(in)
					if !ok {
						return nil, false
					}
					return negateNumber(v)
				}
			}
		}
	}
	for _, s := range suffixes {
		if e == nil || s.Iter || s.Optional {
			return nil
		}
		k, ok := jqpath.Key(s.Index)
		if !ok {
			return nil
		}
		inner, next := e, index(k)
		e = func(in any) (any, bool) {
			v, ok := inner(in)
			if !ok {
				return nil, false
			}
			return next(v)
		}
	}
	return e
}

// constant is the value gojq gives a literal term, computed once by gojq;
// nil when it gives no single value.
func constant(t *gojq.Term) expr {
	code, err := gojq.Compile(&gojq.Query{Term: &gojq.Term{Type: t.Type, Number: t.Number, Str: t.Str}})
	if err != nil {
		return nil
	}
	v, ok := only(code.Run(nil))
	if !ok {
		return nil
	}
	return func(any) (any, bool) { return v, true }
}

// index is .k: the key's value in an object, null in null; other values
// decline (gojq fails them).
func index(k string) expr {
	return func(in any) (any, bool) {
		switch m := in.(type) {
		case nil:
			return nil, true
		case map[string]any:
			return m[k], true
		}
		return nil, false
	}
}

// array is [q] for q a list a, b, ... of expressions of the subset.
func array(q *gojq.Query) expr {
	var elems []expr
	var list func(q *gojq.Query) bool
	list = func(q *gojq.Query) bool {
		if q.Op == gojq.OpComma && q.Term == nil && len(q.FuncDefs) == 0 && len(q.Patterns) == 0 {
			return list(q.Left) && list(q.Right)
		}
		e := native(q)
		elems = append(elems, e)
		return e != nil
	}
	if q != nil && !list(q) {
		return nil
	}
	return func(in any) (any, bool) {
		vs := make([]any, len(elems))
		for i, e := range elems {
			v, ok := e(in)
			if !ok {
				return nil, false
			}
			vs[i] = v
		}
		return vs, true
	}
}

// cond is if-elif-else; no else is else . (jq 1.7).
func cond(x *gojq.If) expr {
	type branch struct{ cond, then expr }
	var bs []branch
	add := func(c, t *gojq.Query) bool {
		b := branch{native(c), native(t)}
		bs = append(bs, b)
		return b.cond != nil && b.then != nil
	}
	if !add(x.Cond, x.Then) {
		return nil
	}
	for _, e := range x.Elif {
		if !add(e.Cond, e.Then) {
			return nil
		}
	}
	otherwise := func(in any) (any, bool) { return in, true }
	if x.Else != nil {
		if otherwise = native(x.Else); otherwise == nil {
			return nil
		}
	}
	return func(in any) (any, bool) {
		for _, b := range bs {
			c, ok := b.cond(in)
			if !ok {
				return nil, false
			}
			if truthy(c) {
				return b.then(in)
			}
		}
		return otherwise(in)
	}
}
