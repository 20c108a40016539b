package jq

import (
	"fmt"

	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/transform/internal/jqpath"
)

// Programs that begin with a pipe of assignments to constant paths and
// deletions of top-level keys (.amount = (.amount_cents / 100) |
// .tier = ... | del(.pad) | ...), the commonest shape of a record
// transform, run those steps here instead of in one gojq program. gojq
// treats every value as shared, so each step copies the object it
// changes: six copies of the record for six steps. Here the record is
// copied once, at the first step that changes it, and the later steps
// change that copy in place. A step's right-hand side is evaluated
// directly where it is in the subset of eval.go, and otherwise runs in
// gojq, compiled on its own, as does whatever follows the steps.
//
// The result is gojq's. A step that would not yield exactly one value
// through the plain path (a right-hand side with no or several results,
// an error, a value that is not an object where the path needs one) is
// not decided here: the whole program then runs in gojq on the original
// input, which the steps never changed, so outputs and errors are gojq's
// own, at the cost of the work done before.

// step is one assignment or deletion of a program's leading steps, or a
// group of assignments that run as one.
type step struct {
	op gojq.Operator // OpAssign, OpModify, an OpUpdate*; 0: a deletion
	// paths are the assigned paths (.a.b: a, b): one, or for a group of
	// assignments one per assignment, in program order.
	paths [][]string
	// rhs is the right-hand side: on the input, or on the path's value
	// for OpModify. A group's yields an array, one value per path.
	rhs  *gojq.Code
	comb *gojq.Code // an OpUpdate*'s ". op $x", on the path's value
	dels []string   // a deletion's top-level keys
	// direct are the right-hand sides as expressions of the subset
	// evaluated here (eval.go), one per path; nil when one is not in it.
	// combine is an OpUpdate*'s operator there. Where they decline, rhs
	// and comb run.
	direct  []expr
	combine func(old, x any) (any, bool)
}

// steps are a program's leading steps and the program that follows them.
type steps struct {
	list []step
	rest *gojq.Code // nil: the steps' result is the output
	// grow is how many top-level keys the steps assign: the room a copy
	// of the object is made with, so that adding them does not grow it.
	grow int
}

// updateOps are the update-assignment operators and the jq operator each
// combines the path's value with the right-hand side's.
var updateOps = map[gojq.Operator]string{
	gojq.OpUpdateAdd: "+", gojq.OpUpdateSub: "-", gojq.OpUpdateMul: "*",
	gojq.OpUpdateDiv: "/", gojq.OpUpdateMod: "%", gojq.OpUpdateAlt: "//",
}

// parsed is a step before it is compiled.
type parsed struct {
	op   gojq.Operator
	path []string
	rhs  *gojq.Query
	dels []string
}

// splitSteps compiles q's leading steps and what follows them, with
// opts; nil when q does not begin with a step, defines functions (which
// every part would need), or holds a pipe gojq may mis-evaluate
// (gojqbug.go), whose answer must then be gojq's own.
func splitSteps(q *gojq.Query, opts ...gojq.CompilerOption) *steps {
	if len(q.FuncDefs) > 0 || len(q.Imports) > 0 || q.Meta != nil || branchedPipe(q) {
		return nil
	}
	var ps []parsed
	for q != nil {
		head, tail := q, (*gojq.Query)(nil)
		if q.Op == gojq.OpPipe && q.Term == nil && len(q.Patterns) == 0 {
			head, tail = q.Left, q.Right
		}
		p, ok := parseStep(head)
		if !ok {
			break
		}
		ps, q = append(ps, p), tail
	}
	// A lone deletion, or a lone assignment whose right-hand side runs in
	// gojq, gains nothing: gojq copies the object once for it too.
	if len(ps) == 0 || (len(ps) == 1 && (ps[0].op == 0 || ps[0].op == gojq.OpAssign && native(ps[0].rhs) == nil)) {
		return nil
	}
	s := &steps{}
	keys := map[string]bool{}
	for _, p := range ps {
		if p.op != 0 {
			keys[p.path[0]] = true
		}
	}
	s.grow = len(keys)
	for _, g := range groups(ps) {
		st, err := compileGroup(g, opts)
		if err != nil {
			return nil
		}
		s.list = append(s.list, st)
	}
	if q != nil {
		code, err := gojq.Compile(q, opts...)
		if err != nil {
			return nil
		}
		s.rest = code
	}
	return s
}

// parseStep is q as a step, if it is one.
func parseStep(q *gojq.Query) (parsed, bool) {
	if len(q.FuncDefs) > 0 {
		return parsed{}, false
	}
	if q.Term != nil {
		keys, ok := deletion(q.Term)
		return parsed{dels: keys}, ok
	}
	path, ok := jqpath.Const(q.Left)
	_, update := updateOps[q.Op]
	if !ok || (q.Op != gojq.OpAssign && q.Op != gojq.OpModify && !update) {
		return parsed{}, false
	}
	return parsed{op: q.Op, path: path, rhs: q.Right}, true
}

// groups joins consecutive assignments whose right-hand sides read the
// input only through top-level keys that no earlier assignment of the
// group wrote: evaluated on the input, they give what they give on the
// object the earlier ones changed, so one gojq run computes them all.
func groups(ps []parsed) [][]parsed {
	var out [][]parsed
	var written map[string]bool // the open group's keys; nil: no group is open
	for _, p := range ps {
		reads := map[string]bool{}
		keyed := p.op == gojq.OpAssign && readsKeys(p.rhs, reads)
		if !keyed || written == nil || overlaps(reads, written) {
			out = append(out, nil)
			written = nil
			if keyed {
				written = map[string]bool{}
			}
		}
		out[len(out)-1] = append(out[len(out)-1], p)
		if written != nil {
			written[p.path[0]] = true
		}
	}
	return out
}

// overlaps reports whether a and b share a key.
func overlaps(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

// compileGroup compiles one step, or a group of assignments as one whose
// right-hand side is (rhs1) as $__step0 | (rhs2) as $__step1 | ... |
// [$__step0, $__step1, ...]: one result if, and only if, each yields one.
func compileGroup(g []parsed, opts []gojq.CompilerOption) (step, error) {
	p := g[0]
	st := step{op: p.op, paths: [][]string{p.path}, dels: p.dels}
	if p.op == 0 {
		return st, nil
	}
	rhs := p.rhs
	if len(g) > 1 {
		st.paths = st.paths[:0]
		var vars *gojq.Query
		for i := len(g) - 1; i >= 0; i-- {
			v := &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeFunc, Func: &gojq.Func{Name: fmt.Sprintf("$__step%d", i)}}}
			if vars != nil {
				v = &gojq.Query{Left: v, Op: gojq.OpComma, Right: vars}
			}
			vars = v
		}
		rhs = &gojq.Query{Term: &gojq.Term{Type: gojq.TermTypeArray, Array: &gojq.Array{Query: vars}}}
		for i := len(g) - 1; i >= 0; i-- {
			rhs = &gojq.Query{Left: g[i].rhs, Op: gojq.OpPipe, Patterns: []*gojq.Pattern{{Name: fmt.Sprintf("$__step%d", i)}}, Right: rhs}
		}
		for _, a := range g {
			st.paths = append(st.paths, a.path)
		}
	}
	var err error
	if st.rhs, err = gojq.Compile(rhs, opts...); err != nil {
		return step{}, err
	}
	for _, a := range g {
		e := native(a.rhs)
		if e == nil {
			st.direct = nil
			break
		}
		st.direct = append(st.direct, e)
	}
	st.combine = updateDirect(p.op)
	if sym, update := updateOps[p.op]; update {
		c, err := gojq.Parse(". " + sym + " $x")
		if err != nil {
			return step{}, err
		}
		if st.comb, err = gojq.Compile(c, append(opts, gojq.WithVariables([]string{"$x"}))...); err != nil {
			return step{}, err
		}
	}
	return st, nil
}

// deletion is the keys of del(.a) or del(.a, .b): top-level keys only,
// whose deletion order does not matter.
func deletion(t *gojq.Term) ([]string, bool) {
	if t.Type != gojq.TermTypeFunc || len(t.SuffixList) > 0 || t.Func.Name != "del" || len(t.Func.Args) != 1 {
		return nil, false
	}
	var keys []string
	var walk func(q *gojq.Query) bool
	walk = func(q *gojq.Query) bool {
		if q.Op == gojq.OpComma && q.Term == nil && len(q.FuncDefs) == 0 {
			return walk(q.Left) && walk(q.Right)
		}
		path, ok := jqpath.Const(q)
		if ok && len(path) == 1 {
			keys = append(keys, path[0])
		}
		return ok && len(path) == 1
	}
	return keys, walk(t.Func.Args[0])
}
