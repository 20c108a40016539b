// Package jqpath reads the commonest jq expression, a path of constant
// object keys (.amount_cents, .customer.id, ."a b"), straight from a
// parsed JSON value, without running it in gojq. The jq transform's
// steps (assignments and deletions at constant paths, and the keys its
// direct evaluator indexes by) and the stateful built-ins' BY and FIELD
// (package groupkey) both read such paths; they
// share this one reading, so that what counts as a constant path, and
// what it yields, is the same in both. Package jq's differential tests
// (FuzzJQDiff, FuzzSteps) and groupkey's (TestExprAsGojq) hold it to gojq.
package jqpath

import "github.com/itchyny/gojq"

// Const returns the keys of q when q is a path of constant object keys
// (.a, ."a", .a.b) and nothing else: no optional or iterating suffix, no
// function definitions, imports or module header, no operator. Not ok for
// anything else.
func Const(q *gojq.Query) ([]string, bool) {
	if q == nil || q.Term == nil || q.Left != nil || q.Right != nil || len(q.FuncDefs) > 0 || len(q.Imports) > 0 ||
		q.Meta != nil || len(q.Patterns) > 0 || q.Term.Type != gojq.TermTypeIndex {
		return nil, false
	}
	k, ok := Key(q.Term.Index)
	if !ok {
		return nil, false
	}
	path := []string{k}
	for _, s := range q.Term.SuffixList {
		if s.Iter || s.Optional {
			return nil, false
		}
		k, ok := Key(s.Index)
		if !ok {
			return nil, false
		}
		path = append(path, k)
	}
	return path, true
}

// Key returns the key of an index .a or ."a" (a string without
// interpolation); not ok for a slice, an index by a value, or an
// interpolated string.
func Key(x *gojq.Index) (string, bool) {
	switch {
	case x == nil || x.IsSlice || x.Start != nil || x.End != nil:
		return "", false
	case x.Str != nil:
		return x.Str.Str, len(x.Str.Queries) == 0
	default:
		return x.Name, x.Name != ""
	}
}

// Get returns the value at path in v, a value as gojq takes it: null
// where a key is missing, as gojq gives. Not ok where a value on the way
// is neither an object nor null, where gojq fails: the caller then runs
// the expression in gojq for its error.
func Get(v any, path []string) (any, bool) {
	for _, k := range path {
		switch m := v.(type) {
		case nil:
		case map[string]any:
			v = m[k]
		default:
			return nil, false
		}
	}
	return v, true
}
