package jq

import (
	"context"
	"maps"

	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/transform/internal/jqpath"
)

// Running a program's leading steps (steps.go) on one value.

// run runs the steps on v and then the rest; not ok when a step is not
// decided here (see above), and the whole program must run instead.
// Owned: nothing else refers to v's top-level object, which the steps may
// then change in place; a step left undecided may have changed it.
func (s *steps) run(ctx context.Context, v any, owned bool) (gojq.Iter, bool) {
	r := stepRun{cur: v, owned: owned, grow: s.grow}
	for i := range s.list {
		if !r.apply(ctx, &s.list[i]) {
			return nil, false
		}
	}
	if s.rest != nil {
		return s.rest.RunWithContext(ctx, r.cur), true
	}
	o := newOne(ctx, r.cur)
	return &o, true
}

// stepRun is the value the steps change: cur, which is this run's own
// copy once owned is set, and may then be changed in place.
type stepRun struct {
	cur   any
	owned bool
	grow  int // the steps' grow
}

// apply applies one step to r.cur.
func (r *stepRun) apply(ctx context.Context, st *step) bool {
	if st.op == 0 {
		return r.delete(st.dels)
	}
	if done, ok := r.applyDirect(st); done {
		return ok
	}
	path := st.paths[0]
	var v any
	var ok bool
	switch st.op {
	case gojq.OpAssign:
		if v, ok = only(st.rhs.RunWithContext(ctx, r.cur)); ok && len(st.paths) > 1 {
			return r.setAll(st.paths, v)
		}
	case gojq.OpModify:
		old, found := jqpath.Get(r.cur, path)
		if !found {
			return false
		}
		v, ok = first(st.rhs.RunWithContext(ctx, old))
	default:
		x, found := only(st.rhs.RunWithContext(ctx, r.cur))
		old, got := jqpath.Get(r.cur, path)
		if !found || !got {
			return false
		}
		v, ok = first(st.comb.RunWithContext(ctx, old, x))
	}
	return ok && r.set(path, v)
}

// setAll sets each of paths to its value of a group's result.
func (r *stepRun) setAll(paths [][]string, v any) bool {
	vs, ok := v.([]any)
	if !ok || len(vs) != len(paths) {
		return false
	}
	for i, p := range paths {
		if !r.set(p, vs[i]) {
			return false
		}
	}
	return true
}

// updateDirect is the operator of an update-assignment op in the subset
// of eval.go: a //= x keeps a truthy value; nil for other ops.
func updateDirect(op gojq.Operator) func(old, x any) (any, bool) {
	switch op {
	case gojq.OpUpdateAdd:
		return binops[gojq.OpAdd]
	case gojq.OpUpdateSub:
		return binops[gojq.OpSub]
	case gojq.OpUpdateMul:
		return binops[gojq.OpMul]
	case gojq.OpUpdateDiv:
		return binops[gojq.OpDiv]
	case gojq.OpUpdateMod:
		return binops[gojq.OpMod]
	case gojq.OpUpdateAlt:
		return func(old, x any) (any, bool) {
			if truthy(old) {
				return old, true
			}
			return x, true
		}
	}
	return nil
}

// applyDirect applies an assignment step through its expressions of the
// subset. Done: the step was evaluated here, and ok says whether it
// applied (a path through a value that is not an object does not). Not
// done, with r.cur untouched, where an expression declines: the step then
// runs in gojq.
func (r *stepRun) applyDirect(st *step) (done, ok bool) {
	if st.direct == nil {
		return false, false
	}
	switch st.op {
	case gojq.OpAssign:
		var one [1]any
		vs := one[:0]
		if len(st.direct) > 1 {
			vs = make([]any, 0, len(st.direct))
		}
		for _, e := range st.direct {
			v, ok := e(r.cur)
			if !ok {
				return false, false
			}
			vs = append(vs, v)
		}
		for i, p := range st.paths {
			if !r.set(p, vs[i]) {
				return true, false
			}
		}
		return true, true
	case gojq.OpModify:
		old, found := jqpath.Get(r.cur, st.paths[0])
		if !found {
			return false, false
		}
		v, ok := st.direct[0](old)
		if !ok {
			return false, false
		}
		return true, r.set(st.paths[0], v)
	}
	if st.combine == nil {
		return false, false
	}
	x, ok := st.direct[0](r.cur)
	if !ok {
		return false, false
	}
	old, found := jqpath.Get(r.cur, st.paths[0])
	if !found {
		return false, false
	}
	v, ok := st.combine(old, x)
	if !ok {
		return false, false
	}
	return true, r.set(st.paths[0], v)
}

// only is it's single value; not ok for none, more or an error.
func only(it gojq.Iter) (any, bool) {
	v, ok := first(it)
	if !ok {
		return nil, false
	}
	if _, more := it.Next(); more {
		return nil, false
	}
	return v, true
}

// first is it's first value; not ok for none or an error.
func first(it gojq.Iter) (any, bool) {
	v, ok := it.Next()
	if _, isErr := v.(error); !ok || isErr {
		return nil, false
	}
	return v, true
}

// set sets path in r.cur to v, creating objects where the path meets
// null; not ok where a value on the way is neither. The top-level object
// is copied unless it is the run's own and v cannot refer to it; the
// objects below it are always copied, as they are shared.
func (r *stepRun) set(path []string, v any) bool {
	top, ok := r.own(!scalar(v))
	if !ok {
		return false
	}
	m := top
	for _, k := range path[:len(path)-1] {
		var child map[string]any
		switch c := m[k].(type) {
		case nil:
			child = map[string]any{}
		case map[string]any:
			child = maps.Clone(c)
		default:
			return false
		}
		m[k], m = child, child
	}
	m[path[len(path)-1]] = v
	return true
}

// delete deletes keys from r.cur: null stays null.
func (r *stepRun) delete(keys []string) bool {
	if r.cur == nil {
		return true
	}
	m, ok := r.own(false)
	for _, k := range keys {
		delete(m, k)
	}
	return ok
}

// own makes r.cur an object of the run's own, a copy unless it is one
// already and fresh is unset; null becomes an empty object. Not ok when
// r.cur is neither an object nor null. A copy left owned and r.cur
// untouched otherwise.
func (r *stepRun) own(fresh bool) (map[string]any, bool) {
	switch m := r.cur.(type) {
	case nil:
		n := map[string]any{}
		r.cur, r.owned = n, true
		return n, true
	case map[string]any:
		if !r.owned || fresh {
			c := make(map[string]any, len(m)+r.grow)
			maps.Copy(c, m)
			r.cur, r.owned, m = c, true, c
		}
		return m, true
	default:
		return nil, false
	}
}

// scalar reports whether v holds no object or array, so that it cannot
// refer to the object it is stored in.
func scalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}
