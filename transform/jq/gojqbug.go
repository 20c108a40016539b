package jq

import "github.com/itchyny/gojq"

// gojq 0.12.20 mis-evaluates a pipe whose left side ends in a branch (an
// if, an and, an or, ...) and whose right side begins with a constant:
// (.b or false | 1) + 0 on {"b":true} fails with "cannot add: number (1)
// and boolean (true)", {x: (.b or false | 1)} with "expected a string for
// object key", .z += (if .b then 1 else 2 end | 3) with "expected an
// object" (jq gives 1, {"x":1}, {"z":3}). Its peephole pass turns a push
// followed by a constant into one push (optimizeCodeOps), but a branch
// that jumps to that constant then pushes it above its own value, which
// stays on the stack; whatever reads the stack next reads the wrong
// value. Run on its own, at the top of a program, the same expression is
// right. The fast path would give jq's answer where gojq gives an error
// or another value, and a record's result would then depend on
// PROCESSOR_JQ_FAST.
//
// The rule: gojq's answer is the one, right or wrong, so that the switch
// never changes a result. A program that holds such a pipe anywhere runs
// in gojq whole (splitSteps), and the direct subset declines it (native).
// The guard is wider than the bug: a left side that ends in any branching
// construct, a right side that begins with anything that may compile to
// a constant. TestGojqBranchedPipeBug fails once a gojq release fixes the
// bug, and FuzzJQDiff holds the guard to gojq.

// branchedPipe reports whether q holds a pipe (or a binding) of that
// shape anywhere.
func branchedPipe(q *gojq.Query) bool {
	found := false
	walkQuery(q, func(q *gojq.Query) {
		found = found || q.Op == gojq.OpPipe && q.Term == nil && riskyPipe(q.Left, q.Right)
	}, nil)
	return found
}

// riskyPipe reports whether left | right is of that shape.
func riskyPipe(left, right *gojq.Query) bool { return endsInBranch(left) && beginsConst(right) }

// endsInBranch reports whether the last thing q's code does may be a
// branch's: an if, and, or, //, a comma, try, reduce, foreach, label, an
// optional suffix, a function definition.
func endsInBranch(q *gojq.Query) bool {
	switch {
	case q == nil:
		return false
	case len(q.FuncDefs) > 0:
		return true
	case q.Term != nil:
		t := q.Term
		if n := len(t.SuffixList); n > 0 {
			return t.SuffixList[n-1].Optional || t.SuffixList[n-1].Iter
		}
		switch t.Type {
		case gojq.TermTypeIf, gojq.TermTypeTry, gojq.TermTypeReduce, gojq.TermTypeForeach, gojq.TermTypeLabel:
			return true
		case gojq.TermTypeQuery:
			return endsInBranch(t.Query)
		}
		return false
	}
	switch q.Op {
	case gojq.OpPipe:
		return endsInBranch(q.Right) || transparent(q.Right) && endsInBranch(q.Left)
	case gojq.OpAnd, gojq.OpOr, gojq.OpAlt, gojq.OpComma:
		return true
	}
	return false
}

// beginsConst reports whether the first thing q's code does may be to
// set a constant: a literal, an array or object, a unary minus, a string,
// $ENV, or an expression that may begin with one.
func beginsConst(q *gojq.Query) bool {
	switch {
	case q == nil:
		return false
	case q.Term != nil:
		switch t := q.Term; t.Type {
		case gojq.TermTypeIdentity, gojq.TermTypeRecurse, gojq.TermTypeIndex, gojq.TermTypeIf:
			return false
		case gojq.TermTypeFunc:
			return t.Func.Name == "$ENV" || t.Func.Name == "env"
		case gojq.TermTypeQuery:
			return beginsConst(t.Query)
		}
		return true
	case len(q.Patterns) > 0:
		return false
	}
	switch q.Op {
	case gojq.OpPipe:
		return beginsConst(q.Left) || transparent(q.Left) && beginsConst(q.Right)
	case gojq.OpComma, gojq.OpAlt, gojq.OpAnd, gojq.OpOr:
		return false
	}
	return beginsConst(q.Left) || beginsConst(q.Right)
}

// transparent reports whether q compiles to no code at all: the
// identity, bare or in parentheses. A pipe through it joins what is on
// either side in gojq's code, so (.b or false | . | 1) is the bug's shape
// as (.b or false | 1) is (found by FuzzJQDiff: .A += (0 or .x | . | 0)
// fails in gojq with "expected an object").
func transparent(q *gojq.Query) bool {
	for q != nil && q.Term != nil && len(q.FuncDefs) == 0 && len(q.Patterns) == 0 && len(q.Term.SuffixList) == 0 {
		switch q.Term.Type {
		case gojq.TermTypeIdentity:
			return true
		case gojq.TermTypeQuery:
			q = q.Term.Query
			continue
		}
		return false
	}
	return false
}

// walkQuery calls onQuery for q and every query within it, and onTerm
// (unless nil) for every term, through every kind of node gojq's parser
// makes.
func walkQuery(q *gojq.Query, onQuery func(*gojq.Query), onTerm func(*gojq.Term)) {
	if q == nil {
		return
	}
	onQuery(q)
	for _, d := range q.FuncDefs {
		walkQuery(d.Body, onQuery, onTerm)
	}
	walkTerm(q.Term, onQuery, onTerm)
	walkQuery(q.Left, onQuery, onTerm)
	walkQuery(q.Right, onQuery, onTerm)
	walkPatterns(q.Patterns, onQuery, onTerm)
}

// walkTerm is walkQuery for a term and what it holds.
func walkTerm(t *gojq.Term, onQuery func(*gojq.Query), onTerm func(*gojq.Term)) {
	if t == nil {
		return
	}
	if onTerm != nil {
		onTerm(t)
	}
	qs := []*gojq.Query{t.Query}
	if t.Func != nil {
		qs = append(qs, t.Func.Args...)
	}
	if t.Object != nil {
		for _, kv := range t.Object.KeyVals {
			qs = append(qs, kv.KeyQuery, kv.Val)
			qs = appendString(qs, kv.KeyString)
		}
	}
	if t.Array != nil {
		qs = append(qs, t.Array.Query)
	}
	if t.If != nil {
		qs = append(qs, t.If.Cond, t.If.Then, t.If.Else)
		for _, e := range t.If.Elif {
			qs = append(qs, e.Cond, e.Then)
		}
	}
	if t.Try != nil {
		qs = append(qs, t.Try.Body, t.Try.Catch)
	}
	if t.Reduce != nil {
		qs = append(qs, t.Reduce.Query, t.Reduce.Start, t.Reduce.Update)
		walkPatterns(t.Reduce.Patterns, onQuery, onTerm)
	}
	if t.Foreach != nil {
		qs = append(qs, t.Foreach.Query, t.Foreach.Start, t.Foreach.Update, t.Foreach.Extract)
		walkPatterns(t.Foreach.Patterns, onQuery, onTerm)
	}
	if t.Label != nil {
		qs = append(qs, t.Label.Body)
	}
	qs = appendIndex(appendString(qs, t.Str), t.Index)
	for _, s := range t.SuffixList {
		qs = appendIndex(qs, s.Index)
	}
	for _, q := range qs {
		walkQuery(q, onQuery, onTerm)
	}
	if t.Unary != nil {
		walkTerm(t.Unary.Term, onQuery, onTerm)
	}
}

// walkPatterns is walkQuery for the queries of destructuring patterns.
func walkPatterns(ps []*gojq.Pattern, onQuery func(*gojq.Query), onTerm func(*gojq.Term)) {
	for _, p := range ps {
		walkPatterns(p.Array, onQuery, onTerm)
		for _, o := range p.Object {
			walkQuery(o.KeyQuery, onQuery, onTerm)
			for _, q := range appendString(nil, o.KeyString) {
				walkQuery(q, onQuery, onTerm)
			}
			if o.Val != nil {
				walkPatterns([]*gojq.Pattern{o.Val}, onQuery, onTerm)
			}
		}
	}
}

// appendString appends the interpolations of s, if any.
func appendString(qs []*gojq.Query, s *gojq.String) []*gojq.Query {
	if s == nil {
		return qs
	}
	return append(qs, s.Queries...)
}

// appendIndex appends the queries of an index: its start, end and key.
func appendIndex(qs []*gojq.Query, x *gojq.Index) []*gojq.Query {
	if x == nil {
		return qs
	}
	return appendString(append(qs, x.Start, x.End), x.Str)
}
