package jq

import (
	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/transform/internal/jqpath"
)

// readsKeys reports whether q reads its input only through constant
// top-level keys (.a, .a.b[0], ."a"), adding those keys to keys. The
// right of a pipe is not looked at: its input is a value derived from
// those keys, whatever it does with it.
//
// It is an allowlist: it answers true only when every node of q is of a
// kind whose reads of the input it enumerates; any other kind (., .., a
// function of the input, an object construction, an interpolated key, an
// if without else, which yields its input, reduce, foreach, a label,
// whatever a later gojq adds) makes it false, the caller then taking q as
// reading the whole input. It answers for a program that compiled, so
// every variable is bound.
func readsKeys(q *gojq.Query, keys map[string]bool) bool {
	switch {
	case q == nil || len(q.FuncDefs) > 0 || len(q.Imports) > 0:
		return false
	case q.Term != nil:
		return q.Left == nil && q.Right == nil && len(q.Patterns) == 0 && termReadsKeys(q.Term, keys)
	case q.Op == gojq.OpPipe && len(q.Patterns) > 0: // left as $x | right: both on the input
		for _, p := range q.Patterns {
			if p.Name == "" {
				return false
			}
		}
		return readsKeys(q.Left, keys) && readsKeys(q.Right, keys)
	case len(q.Patterns) > 0:
		return false
	case q.Op == gojq.OpPipe: // right: on the left's values
		return readsKeys(q.Left, keys)
	case binaryOps[q.Op]: // both sides on the input
		return readsKeys(q.Left, keys) && readsKeys(q.Right, keys)
	default: // an assignment yields the whole input, changed
		return false
	}
}

// binaryOps are the operators both of whose sides run on the input and
// whose result is made of theirs only.
var binaryOps = map[gojq.Operator]bool{
	gojq.OpComma: true, gojq.OpAdd: true, gojq.OpSub: true, gojq.OpMul: true, gojq.OpDiv: true, gojq.OpMod: true,
	gojq.OpEq: true, gojq.OpNe: true, gojq.OpGt: true, gojq.OpLt: true, gojq.OpGe: true, gojq.OpLe: true,
	gojq.OpAnd: true, gojq.OpOr: true, gojq.OpAlt: true,
}

// termReadsKeys is readsKeys for a term whose input is the program's.
func termReadsKeys(t *gojq.Term, keys map[string]bool) bool {
	ok := false
	switch t.Type {
	case gojq.TermTypeNull, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNumber:
		ok = true
	case gojq.TermTypeIndex:
		var k string
		if k, ok = jqpath.Key(t.Index); ok {
			keys[k] = true
		}
	case gojq.TermTypeFunc:
		// A variable, or empty; any other function reads the input.
		ok = len(t.Func.Args) == 0 && (t.Func.Name == "empty" || t.Func.Name[0] == '$')
	case gojq.TermTypeString:
		ok = t.Str != nil && queriesReadKeys(t.Str.Queries, keys)
	case gojq.TermTypeArray:
		ok = t.Array.Query == nil || readsKeys(t.Array.Query, keys)
	case gojq.TermTypeUnary:
		ok = termReadsKeys(t.Unary.Term, keys)
	case gojq.TermTypeQuery:
		ok = readsKeys(t.Query, keys)
	case gojq.TermTypeIf:
		// Without else, an if whose conditions all fail yields its input.
		ok = t.If.Else != nil && readsKeys(t.If.Cond, keys) && readsKeys(t.If.Then, keys) && readsKeys(t.If.Else, keys)
		for _, e := range t.If.Elif {
			ok = ok && readsKeys(e.Cond, keys) && readsKeys(e.Then, keys)
		}
	case gojq.TermTypeTry: // the catch's input is the error
		ok = readsKeys(t.Try.Body, keys)
	}
	// Suffixes apply to the term's value, but the queries of an index
	// (.a[.i], .a."\(.k)") run on the input.
	for _, s := range t.SuffixList {
		if x := s.Index; ok && x != nil {
			ok = (x.Start == nil || readsKeys(x.Start, keys)) && (x.End == nil || readsKeys(x.End, keys)) &&
				(x.Str == nil || queriesReadKeys(x.Str.Queries, keys))
		}
	}
	return ok
}

// queriesReadKeys is readsKeys for each of qs (a string's interpolations).
func queriesReadKeys(qs []*gojq.Query, keys map[string]bool) bool {
	for _, q := range qs {
		if !readsKeys(q, keys) {
			return false
		}
	}
	return true
}
