package jq

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// A generator of jq programs and JSON values from fuzz bytes, for
// FuzzJQDiff: each byte it reads picks a production of a small grammar of
// jq, so that every mutation of the bytes is a program (most of which
// parse; those that do not are skipped). It covers the language a record
// transform uses, not only the subset the fast path evaluates: paths with
// interpolated and optional keys, as bindings, reduce and foreach, try and
// catch, if with and without else and elif, object and array construction,
// string interpolation, //, every update operator, del, select, map,
// to_entries, with_entries, tostring and tonumber, arithmetic and
// comparisons across types. Programs begin with assignment steps more
// often than not, so that the steps, the direct subset and the in-place
// path run. Nothing it generates loops or grows without bound: no
// recursion, range or repeat, * only by a small literal, a reduce or
// foreach of at most four rounds and none inside another (safeText holds
// programs the fuzzer writes as text to the same).

// gen reads choices from fuzz bytes; past their end every choice is 0,
// the smallest production.
type gen struct {
	b      []byte
	vars   []string // the variables bound where the generator is
	n      int      // variables bound so far, for fresh names
	inFold bool     // inside a reduce or foreach
}

// pick is a choice among n.
func (g *gen) pick(n int) int {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return int(c) % n
}

// genKeys are the keys of the generated values and programs, so that
// programs read what the values hold: the record among them.
var genKeys = []string{"a", "b", "c", "k", "n", "s", "x", "currency", "rates", "EUR", "q k"}

// genScalars are the edge values of inputs, as JSON text: integers at and
// past 2^53 and ±2^63, 2^64, an overflowing float, -0, the smallest
// denormal, 0.1, strings that are and are not numbers, non-ASCII.
var genScalars = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `2`, `7`, `0.1`, `1.5`, `-2.5e-1`, `100`, `1e3`,
	`9007199254740993`, `9223372036854775807`, `-9223372036854775808`, `9223372036854775808`,
	`18446744073709551616`, `1e1000`, `-1e1000`, `5e-324`,
	`"007"`, `"é😀"`, `""`, `"eur"`, `"EUR"`, `"a"`, `"s"`, `"12"`, `"-12"`, `"1e3"`, `"x y"`, `"q k"`,
}

// genLiterals are the literals of programs.
var genLiterals = []string{
	`null`, `true`, `false`, `0`, `1`, `-1`, `2`, `0.5`, `1e3`, `9007199254740993`, `1e1000`,
	`"s"`, `"007"`, `"é😀"`, `""`, `"EUR"`, `"a"`, `"12"`, `"x"`,
}

// value is a JSON value of at most depth levels of nesting.
func (g *gen) value(depth int) string {
	switch c := g.pick(8); {
	case depth > 0 && c == 6:
		n := g.pick(4)
		vs := make([]string, n)
		for i := range vs {
			vs[i] = g.value(depth - 1)
		}
		return "[" + strings.Join(vs, ",") + "]"
	case depth > 0 && c >= 4:
		seen := map[string]bool{}
		var fs []string
		for n := g.pick(5); n > 0; n-- {
			k := genKeys[g.pick(len(genKeys))]
			if !seen[k] {
				seen[k] = true
				fs = append(fs, strconv.Quote(k)+":"+g.value(depth-1))
			}
		}
		return "{" + strings.Join(fs, ",") + "}"
	default:
		return genScalars[g.pick(len(genScalars))]
	}
}

// input is a value for a program: an object more often than not.
func (g *gen) input() string {
	if g.pick(4) == 0 {
		return g.value(3)
	}
	seen := map[string]bool{}
	var fs []string
	for n := 1 + g.pick(6); n > 0; n-- {
		k := genKeys[g.pick(len(genKeys))]
		if !seen[k] {
			seen[k] = true
			fs = append(fs, strconv.Quote(k)+":"+g.value(2))
		}
	}
	return "{" + strings.Join(fs, ",") + "}"
}

// program is a pipe of leading steps and, maybe, an expression after them.
func (g *gen) program() string {
	var parts []string
	for n := g.pick(4); n > 0; n-- {
		parts = append(parts, g.step())
	}
	if len(parts) == 0 || g.pick(3) == 0 {
		parts = append(parts, g.expr(3))
	}
	return strings.Join(parts, " | ")
}

// updateOps are jq's assignment operators.
var genAssignOps = []string{"=", "|=", "+=", "-=", "*=", "/=", "%=", "//="}

// step is an assignment to a path, or a deletion.
func (g *gen) step() string {
	if g.pick(6) == 0 {
		ps := []string{g.path(0)}
		for g.pick(3) == 1 {
			ps = append(ps, g.path(0))
		}
		return "del(" + strings.Join(ps, ", ") + ")"
	}
	path, op := g.path(1), genAssignOps[g.pick(len(genAssignOps))]
	if op == "*=" {
		return path + " *= " + genLiterals[g.pick(8)]
	}
	return path + " " + op + " " + g.wrap(g.expr(2))
}

// key is an object key in a path: a name, quoted or not.
func (g *gen) key() string {
	k := genKeys[g.pick(len(genKeys))]
	if k == "q k" || k == "EUR" || g.pick(4) == 0 {
		return strconv.Quote(k)
	}
	return k
}

// path is a path: mostly constant keys; with depth, also interpolated
// keys, optional keys, array indexes and iterations.
func (g *gen) path(depth int) string {
	p := "." + g.key()
	for n := g.pick(3); n > 0; n-- {
		switch c := g.pick(9); {
		case c == 0 && depth > 0:
			p += `."\(` + g.expr(0) + `)"`
		case c == 1 && depth > 0:
			p += "[" + g.expr(0) + "]"
		case c == 2:
			p += "?"
		case c == 3:
			p += "[" + strconv.Itoa(g.pick(3)-1) + "]"
		case c == 4:
			p += "[]?"
		default:
			p += "." + g.key()
		}
	}
	return p
}

// wrap parenthesizes e, or not: unparenthesized, precedence gives
// shapes such as a and b | c on the right of an operator.
func (g *gen) wrap(e string) string {
	if g.pick(3) == 0 {
		return e
	}
	return "(" + e + ")"
}

// genBinary are the binary operators of expressions (* apart).
var genBinary = []string{"|", ",", "//", "and", "or", "+", "-", "/", "%", "==", "!=", "<", "<=", ">", ">="}

// genFuncs0 are the functions without arguments of expressions.
var genFuncs0 = []string{
	"length", "not", "type", "tostring", "tonumber", "ascii_downcase", "ascii_upcase", "keys", "to_entries",
	"from_entries", "add", "tojson", "empty", ".[]?", "values", "floor", "sort",
}

// genFuncs1 are the functions with one argument of expressions.
var genFuncs1 = []string{"select", "map", "with_entries", "ltrimstr", "rtrimstr", "join", "has", "error", "map_values", "del", "paths", "any", "all"}

// expr is an expression of at most depth levels of nesting.
func (g *gen) expr(depth int) string {
	if depth <= 0 {
		return g.leaf()
	}
	d := depth - 1
	switch g.pick(16) {
	case 0, 1:
		return g.leaf()
	case 2:
		return g.wrap(g.expr(d)) + " " + genBinary[g.pick(len(genBinary))] + " " + g.wrap(g.expr(d))
	case 3:
		return g.wrap(g.expr(d)) + " * " + genLiterals[g.pick(8)]
	case 4:
		return g.cond(d)
	case 5:
		if g.pick(2) == 0 {
			return "try " + g.wrap(g.expr(d))
		}
		return "try " + g.wrap(g.expr(d)) + " catch " + g.wrap(g.expr(d))
	case 6:
		return g.bind(d)
	case 7:
		return g.fold(d)
	case 8:
		return g.object(d)
	case 9:
		return "[" + g.expr(d) + "]"
	case 10:
		return `"<\(` + g.expr(d) + `)>"`
	case 11:
		return genFuncs0[g.pick(len(genFuncs0))]
	case 12:
		return genFuncs1[g.pick(len(genFuncs1))] + "(" + g.expr(d) + ")"
	case 13:
		path, op := g.path(1), genAssignOps[g.pick(len(genAssignOps))]
		if op == "*=" {
			return path + " *= " + genLiterals[g.pick(8)]
		}
		return path + " " + op + " " + g.wrap(g.expr(d))
	case 14:
		return "-" + g.wrap(g.expr(d))
	default:
		return g.wrap(g.expr(d)) + " | " + g.wrap(g.expr(d))
	}
}

// leaf is ., a path, a literal or a variable in scope.
func (g *gen) leaf() string {
	switch c := g.pick(6); {
	case c == 0:
		return "."
	case c <= 2:
		return g.path(0)
	case c == 3 && len(g.vars) > 0:
		return g.vars[g.pick(len(g.vars))]
	default:
		return genLiterals[g.pick(len(genLiterals))]
	}
}

// cond is an if with or without elif and else.
func (g *gen) cond(d int) string {
	s := "if " + g.expr(d) + " then " + g.expr(d)
	for n := g.pick(3); n > 1; n-- {
		s += " elif " + g.expr(d) + " then " + g.expr(d)
	}
	if g.pick(2) == 0 {
		s += " else " + g.expr(d)
	}
	return s + " end"
}

// fresh binds a new variable for the length of body.
func (g *gen) fresh(body func(v string) string) string {
	v := "$v" + strconv.Itoa(g.n)
	g.n++
	g.vars = append(g.vars, v)
	s := body(v)
	g.vars = g.vars[:len(g.vars)-1]
	return s
}

// bind is e as $v | body.
func (g *gen) bind(d int) string {
	src := g.wrap(g.expr(d))
	return g.fresh(func(v string) string { return src + " as " + v + " | " + g.expr(d) })
}

// fold is a reduce or a foreach over a generator of the input.
func (g *gen) fold(d int) string {
	if g.inFold { // a fold in a fold could grow a value exponentially
		return g.leaf()
	}
	g.inFold = true
	defer func() { g.inFold = false }()
	// At most four rounds: an update such as [., .] doubles the value.
	src, init := "limit(4; "+g.expr(d)+")", g.expr(d)
	return g.fresh(func(v string) string {
		if g.pick(2) == 0 {
			return "reduce " + src + " as " + v + " (" + init + "; " + g.expr(d) + ")"
		}
		s := "foreach " + src + " as " + v + " (" + init + "; " + g.expr(d)
		if g.pick(2) == 0 {
			s += "; " + g.expr(d)
		}
		return s + ")"
	})
}

// object is an object construction: key: value, a shorthand key, a
// computed or interpolated key.
func (g *gen) object(d int) string {
	var fs []string
	for n := g.pick(4); n > 0; n-- {
		switch g.pick(5) {
		case 0:
			fs = append(fs, g.key())
		case 1:
			fs = append(fs, "("+g.expr(d)+"): "+g.wrap(g.expr(d)))
		case 2:
			fs = append(fs, `"k\(`+g.expr(d)+`)": `+g.wrap(g.expr(d)))
		default:
			fs = append(fs, g.key()+": "+g.wrap(g.expr(d)))
		}
	}
	return "{" + strings.Join(fs, ", ") + "}"
}

// The generator's programs are mostly jq that compiles, and reach the
// fast paths: steps, a direct right-hand side, and gojq's fallback; and
// each construct of the grammar appears. A generator that drifted to
// programs gojq refuses would fuzz nothing.
func TestDiffGenReach(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	const n = 4000
	compiled, stepped, direct := 0, 0, 0
	seen := map[string]bool{}
	for range n {
		b := make([]byte, 64)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		g := &gen{b: b}
		expr := g.program()
		p, err := Compile(expr)
		if err != nil {
			continue
		}
		compiled++
		for _, w := range genConstructs {
			if strings.Contains(expr, w) {
				seen[w] = true
			}
		}
		if p.steps != nil {
			stepped++
			for _, s := range p.steps.list {
				if s.direct != nil {
					direct++
					break
				}
			}
		}
	}
	t.Logf("of %d programs: %d compile, %d take the steps, %d with a direct right-hand side", n, compiled, stepped, direct)
	if compiled < n/2 || stepped < n/10 || direct < n/20 {
		t.Errorf("of %d programs: %d compile, %d take the steps, %d with a direct right-hand side", n, compiled, stepped, direct)
	}
	for _, w := range genConstructs {
		if !seen[w] {
			t.Errorf("no compiled program has %q", w)
		}
	}
}

// genConstructs are what TestDiffGenReach looks for in the programs.
var genConstructs = []string{
	`\(`, "?", " as $", "reduce ", "foreach ", "try ", " catch ", " else ", " elif ", "{", "[", "//",
	" = ", " |= ", " += ", " -= ", " *= ", " /= ", " %= ", " //= ", "del(", "select(", "map(", "to_entries",
	"with_entries(", "tostring", "tonumber", " and ", " or ", " < ", " == ",
}
