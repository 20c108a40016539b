package groupkey

import (
	"context"

	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/transform/jq"
)

// Expr is a compiled jq expression whose first result a stateful
// built-in reads: aggregate's FIELD, a BY. The commonest ones are paths
// of constant object keys (.amount_cents, .customer.id), whose value is
// read here straight from the parsed value: gojq's run of them costs an
// environment, stacks and a context check, more than the rest of a
// count's work. The direct read answers only where gojq's answer is
// sure: an object's member (null when missing) and null's (null); on any
// other value on the way, where gojq fails, or with ctx done, the
// expression runs in gojq, which gives its own result or error.
// TestExprAsGojq holds the two to each other.
type Expr struct {
	prog *jq.Program
	path []string // the keys of a path of constant keys; nil: none
}

// CompileExpr compiles expr (not empty).
func CompileExpr(expr string) (*Expr, error) {
	p, err := jq.Compile(expr)
	if err != nil {
		return nil, err
	}
	e := &Expr{prog: p}
	if q, err := gojq.Parse(expr); err == nil {
		e.path = constPath(q)
	}
	return e, nil
}

// First returns the expression's first result on v, a value from
// jq.ParseValue or Picker.Parse; no result is an error.
func (e *Expr) First(ctx context.Context, v any) (any, error) {
	pk, picked := v.(*Picked)
	if e.path != nil && ctx.Err() == nil {
		var r any
		var ok bool
		if picked {
			r, ok = pk.get(e.path)
		} else {
			r, ok = get(v, e.path)
		}
		if ok {
			return r, nil
		}
	}
	if picked { // gojq's answer, on the whole value
		full, err := jq.ParseValue(pk.raw)
		if err != nil {
			return nil, err
		}
		v = full
	}
	return First(ctx, e.prog, v)
}

// get is the value at path in v, null where a key is missing; not ok
// where a value on the way is neither an object nor null.
func get(v any, path []string) (any, bool) {
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

// constPath is the keys of q when it is a path of constant object keys
// (.a, ."a", .a.b) and nothing else; nil otherwise.
func constPath(q *gojq.Query) []string {
	if q == nil || q.Term == nil || q.Left != nil || q.Right != nil || len(q.FuncDefs) > 0 || len(q.Imports) > 0 ||
		q.Meta != nil || len(q.Patterns) > 0 || q.Term.Type != gojq.TermTypeIndex {
		return nil
	}
	k, ok := constKey(q.Term.Index)
	if !ok {
		return nil
	}
	path := []string{k}
	for _, s := range q.Term.SuffixList {
		if s.Iter || s.Optional {
			return nil
		}
		k, ok := constKey(s.Index)
		if !ok {
			return nil
		}
		path = append(path, k)
	}
	return path
}

// constKey is the key of an index .a or ."a".
func constKey(x *gojq.Index) (string, bool) {
	switch {
	case x == nil || x.IsSlice || x.Start != nil || x.End != nil:
		return "", false
	case x.Str != nil:
		return x.Str.Str, len(x.Str.Queries) == 0
	default:
		return x.Name, x.Name != ""
	}
}
