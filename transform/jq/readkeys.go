package jq

import "github.com/itchyny/gojq"

// readsKeys reports whether q reads its input only through constant
// top-level keys (.a, .a.b[0], ."a"), adding those keys to keys. The
// right of a pipe is not looked at: its input is a value derived from
// those keys, whatever it does with it. Anything it cannot be sure of
// (., .., a function of the input, an object construction, a computed
// key) makes it false; it answers for a program that compiled, so every
// variable is bound.
func readsKeys(q *gojq.Query, keys map[string]bool) bool {
	switch {
	case q == nil:
		return true
	case len(q.FuncDefs) > 0:
		return false
	case q.Term != nil:
		return termReadsKeys(q.Term, keys)
	case q.Op == gojq.OpPipe && len(q.Patterns) > 0: // left as $x | right: both on the input
		for _, p := range q.Patterns {
			if p.Name == "" {
				return false
			}
		}
		return readsKeys(q.Left, keys) && readsKeys(q.Right, keys)
	case q.Op == gojq.OpPipe: // right: on the left's values
		return readsKeys(q.Left, keys)
	case q.Op >= gojq.OpComma && q.Op <= gojq.OpAlt: // , and the binary operators
		return readsKeys(q.Left, keys) && readsKeys(q.Right, keys)
	default: // an assignment yields the whole input, changed
		return false
	}
}

// termReadsKeys is readsKeys for a term whose input is the program's.
func termReadsKeys(t *gojq.Term, keys map[string]bool) bool {
	ok := false
	switch t.Type {
	case gojq.TermTypeNull, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNumber:
		ok = true
	case gojq.TermTypeIndex:
		var k string
		if k, ok = constKey(t.Index); ok {
			keys[k] = true
		}
	case gojq.TermTypeFunc:
		// A variable, or empty; any other function reads the input.
		ok = len(t.Func.Args) == 0 && (t.Func.Name == "empty" || t.Func.Name[0] == '$')
	case gojq.TermTypeString:
		ok = t.Str != nil
		for i := 0; ok && i < len(t.Str.Queries); i++ {
			ok = readsKeys(t.Str.Queries[i], keys)
		}
	case gojq.TermTypeArray:
		ok = readsKeys(t.Array.Query, keys)
	case gojq.TermTypeUnary:
		ok = termReadsKeys(t.Unary.Term, keys)
	case gojq.TermTypeQuery:
		ok = readsKeys(t.Query, keys)
	case gojq.TermTypeIf:
		ok = readsKeys(t.If.Cond, keys) && readsKeys(t.If.Then, keys) && readsKeys(t.If.Else, keys)
		for _, e := range t.If.Elif {
			ok = ok && readsKeys(e.Cond, keys) && readsKeys(e.Then, keys)
		}
	case gojq.TermTypeTry: // the catch's input is the error
		ok = readsKeys(t.Try.Body, keys)
	}
	// Suffixes apply to the term's value, but the queries of an index
	// (.a[.i]) run on the input.
	for _, s := range t.SuffixList {
		if x := s.Index; ok && x != nil {
			ok = readsKeys(x.Start, keys) && readsKeys(x.End, keys)
		}
	}
	return ok
}
