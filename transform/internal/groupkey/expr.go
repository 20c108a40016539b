package groupkey

import (
	"context"

	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/transform/internal/jqpath"
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
		e.path, _ = jqpath.Const(q)
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
			r, ok = jqpath.Get(v, e.path)
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
