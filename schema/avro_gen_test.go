package schema

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// diffGen makes random Avro schemas and, for each, random values in two
// forms at once: the Go value twmb/avro encodes and the plain JSON the
// codec decodes to (compact, fields in schema order).
type diffGen struct {
	rng   *rand.Rand
	named []diffNamed // named types defined so far, to reference again
	n     int         // names given
	// offFirst is set when a default takes a union branch other than
	// the first (twmb/avro takes the first that fits the value, which
	// may then be another than the one made).
	offFirst bool
}

// diffNamed is a named type already defined: its full name and how to
// make a value of it.
type diffNamed struct {
	name  string
	value diffValue
}

// diffOut is one value in three forms: the Go value twmb/avro encodes,
// the codec's plain JSON, and Avro's JSON for a default.
type diffOut struct {
	v     any
	plain string
	lit   string
	// given is the plain JSON to encode: plain without the record
	// fields left out to take their defaults (set on records only).
	given string
}

// in is the plain JSON to encode.
func (o diffOut) in() string {
	if o.given != "" {
		return o.given
	}
	return o.plain
}

// diffValue makes one value; for a default (def), a union takes its
// first branch and floats are finite.
type diffValue func(g *diffGen, depth int, def bool) diffOut

// schema returns a random schema's JSON and its value maker; ns is the
// enclosing namespace.
func (g *diffGen) schema(depth int, ns string) (string, diffValue) {
	k := g.rng.IntN(16)
	if depth > 3 {
		k = g.rng.IntN(8)
	}
	switch k {
	case 0, 1, 2, 3, 4, 5, 6, 7:
		return g.primitive(ns)
	case 8, 9:
		return g.record(depth, ns)
	case 10:
		name := g.name(ns)
		syms := []string{"A", "B", "C_1", "d"}[:1+g.rng.IntN(4)]
		quoted := make([]string, len(syms))
		for i, s := range syms {
			quoted[i] = strconv.Quote(s)
		}
		v := func(g *diffGen, _ int, _ bool) diffOut {
			s := syms[g.rng.IntN(len(syms))]
			return diffOut{s, strconv.Quote(s), strconv.Quote(s), ""}
		}
		g.named = append(g.named, diffNamed{diffFull(name, ns), v})
		return fmt.Sprintf(`{"type":"enum","name":%q,"symbols":[%s]}`, name, strings.Join(quoted, ",")), v
	case 11:
		items, iv := g.schema(depth+1, ns)
		return fmt.Sprintf(`{"type":"array","items":%s}`, items), func(g *diffGen, depth int, def bool) diffOut {
			n := g.rng.IntN(4)
			if depth > 6 {
				n = 0
			}
			out, parts, lits, given := make([]any, n), make([]string, n), make([]string, n), make([]string, n)
			for i := range out {
				o := iv(g, depth+1, def)
				out[i], parts[i], lits[i], given[i] = o.v, o.plain, o.lit, o.in()
			}
			return diffOut{out, "[" + strings.Join(parts, ",") + "]", "[" + strings.Join(lits, ",") + "]", "[" + strings.Join(given, ",") + "]"}
		}
	case 12:
		values, vv := g.schema(depth+1, ns)
		return fmt.Sprintf(`{"type":"map","values":%s}`, values), func(g *diffGen, depth int, def bool) diffOut {
			// At most one key: twmb/avro writes a map in Go's random
			// order, and the bytes are compared.
			if g.rng.IntN(2) == 0 || depth > 6 {
				return diffOut{map[string]any{}, "{}", "{}", ""}
			}
			key := []string{"", "k", "ké\"y"}[g.rng.IntN(3)]
			o := vv(g, depth+1, def)
			q, _ := jsontext.AppendQuote(nil, key)
			return diffOut{map[string]any{key: o.v}, "{" + string(q) + ":" + o.plain + "}", "{" + string(q) + ":" + o.lit + "}", "{" + string(q) + ":" + o.in() + "}"}
		}
	case 13, 14:
		return g.union(depth, ns)
	}
	if len(g.named) > 0 {
		d := g.named[g.rng.IntN(len(g.named))]
		return strconv.Quote(d.name), d.value
	}
	return g.fixed(ns)
}

// name returns a new full name, in namespace ns or a new one.
func (g *diffGen) name(ns string) string {
	g.n++
	switch g.rng.IntN(3) {
	case 0:
		return "N" + strconv.Itoa(g.n)
	case 1:
		return "ns" + strconv.Itoa(g.rng.IntN(2)) + ".N" + strconv.Itoa(g.n)
	}
	if ns == "" {
		return "N" + strconv.Itoa(g.n)
	}
	return ns + ".N" + strconv.Itoa(g.n)
}

// record makes a record of up to four fields.
func (g *diffGen) record(depth int, ns string) (string, diffValue) {
	name := g.name(ns)
	full := diffFull(name, ns)
	inner := full[:max(strings.LastIndexByte(full, '.'), 0)]
	n := g.rng.IntN(5)
	fields, makers := make([]string, n), make([]diffValue, n)
	defs := make([]*diffOut, n) // a field's default
	for i := range fields {
		var typ string
		typ, makers[i] = g.schema(depth+1, inner)
		fields[i] = fmt.Sprintf(`{"name":"f%d","type":%s}`, i, typ)
		if g.rng.IntN(3) == 0 {
			g.offFirst = false
			d := makers[i](g, 5, true)
			if !g.offFirst {
				defs[i] = &d // values may leave the field out
			}
			fields[i] = fmt.Sprintf(`{"name":"f%d","type":%s,"default":%s}`, i, typ, d.lit)
		}
	}
	v := func(g *diffGen, depth int, def bool) diffOut {
		m := make(map[string]any, n)
		var parts, given, lits []string
		for i, mk := range makers {
			key := "f" + strconv.Itoa(i)
			o := mk(g, depth+1, def)
			omit := defs[i] != nil && !def && g.rng.IntN(2) == 0
			if omit {
				o = *defs[i] // missing: the codec writes the default
			}
			m[key] = o.v
			parts = append(parts, strconv.Quote(key)+":"+o.plain)
			lits = append(lits, strconv.Quote(key)+":"+o.lit)
			if !omit {
				given = append(given, strconv.Quote(key)+":"+o.plain)
			}
		}
		return diffOut{m, "{" + strings.Join(parts, ",") + "}", "{" + strings.Join(lits, ",") + "}", "{" + strings.Join(given, ",") + "}"}
	}
	g.named = append(g.named, diffNamed{full, v})
	return fmt.Sprintf(`{"type":"record","name":%q,"fields":[%s]}`, name, strings.Join(fields, ",")), v
}

// fixed makes a fixed, sometimes a decimal or a duration.
func (g *diffGen) fixed(ns string) (string, diffValue) {
	name := g.name(ns)
	size := 1 + g.rng.IntN(8)
	var v diffValue
	text := fmt.Sprintf(`{"type":"fixed","name":%q,"size":%d}`, name, size)
	switch g.rng.IntN(3) {
	case 0:
		prec := min(1+g.rng.IntN(18), int(math.Floor(math.Log10(2)*float64(8*size-1))))
		if prec < 1 {
			size, prec = 2, 4
		}
		scale := g.rng.IntN(prec + 1)
		text = fmt.Sprintf(`{"type":"fixed","name":%q,"size":%d,"logicalType":"decimal","precision":%d,"scale":%d}`, name, size, prec, scale)
		v = func(g *diffGen, _ int, _ bool) diffOut { return g.decimal(prec, scale, size) }
	case 1:
		size = 12
		text = fmt.Sprintf(`{"type":"fixed","name":%q,"size":12,"logicalType":"duration"}`, name)
		fallthrough
	default:
		v = func(g *diffGen, _ int, _ bool) diffOut { return g.bytes(size) }
	}
	g.named = append(g.named, diffNamed{diffFull(name, ns), v})
	return text, v
}

// union makes a nullable union or one of distinct branches.
func (g *diffGen) union(depth int, ns string) (string, diffValue) {
	if g.rng.IntN(2) == 0 {
		typ, tv := g.schema(depth+1, ns)
		if strings.HasPrefix(typ, "[") || typ == `"null"` {
			return typ, tv // no union in a union; null alone
		}
		nullFirst := g.rng.IntN(2) == 0
		text := "[\"null\"," + typ + "]"
		if !nullFirst {
			text = "[" + typ + ",\"null\"]"
		}
		return text, func(g *diffGen, depth int, def bool) diffOut {
			null := g.rng.IntN(3) == 0 || depth > 6
			if def && null != nullFirst {
				g.offFirst = true
			}
			if null {
				return diffOut{nil, "null", "null", ""}
			}
			o := tv(g, depth+1, def)
			o.given = o.in()
			return o
		}
	}
	type branch struct {
		key string
		v   diffValue
	}
	var texts []string
	var branches []branch
	seen := map[string]bool{}
	for i := 0; i < 1+g.rng.IntN(4); i++ {
		defined := len(g.named)
		typ, tv := g.schema(depth+1, ns)
		key := diffBranchKey(typ, ns)
		if strings.HasPrefix(typ, "[") || seen[key] {
			g.named = g.named[:defined] // dropped, with what it defined
			continue
		}
		seen[key] = true
		texts = append(texts, typ)
		branches = append(branches, branch{key, tv})
	}
	if len(branches) == 0 {
		texts, branches = []string{`"int"`}, []branch{{"int", diffInt}}
	}
	if len(branches) == 2 && (branches[0].key == "null" || branches[1].key == "null") {
		texts, branches = texts[:1], branches[:1] // a nullable union is made above
	}
	return "[" + strings.Join(texts, ",") + "]", func(g *diffGen, depth int, def bool) diffOut {
		i := g.rng.IntN(len(branches))
		if def && g.rng.IntN(2) == 0 {
			i = 0
		}
		g.offFirst = g.offFirst || def && i > 0
		b := branches[i]
		if b.key == "null" {
			return diffOut{nil, "null", "null", ""}
		}
		o := b.v(g, depth+1, def)
		return diffOut{map[string]any{b.key: o.v}, fmt.Sprintf("{%q:%s}", b.key, o.plain), o.lit, fmt.Sprintf("{%q:%s}", b.key, o.in())}
	}
}

// diffBranchKey is a branch's key: a named type's full name (the
// generator writes full names), else its type.
func diffBranchKey(typ, ns string) string {
	if strings.HasPrefix(typ, `"`) {
		return strings.Trim(typ, `"`)
	}
	var t struct{ Type, Name string }
	_ = json.Unmarshal([]byte(typ), &t)
	switch t.Type {
	case "record", "enum", "fixed":
		return diffFull(t.Name, ns)
	}
	return t.Type
}

// diffFull is the full name of name written in namespace ns.
func diffFull(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

// primitive makes a primitive, sometimes with a logical type.
func (g *diffGen) primitive(ns string) (string, diffValue) {
	switch g.rng.IntN(14) {
	case 0:
		return `"null"`, func(*diffGen, int, bool) diffOut { return diffOut{nil, "null", "null", ""} }
	case 1:
		return `"boolean"`, func(g *diffGen, _ int, _ bool) diffOut {
			b := strconv.FormatBool(g.rng.IntN(2) == 0)
			return diffOut{b == "true", b, b, ""}
		}
	case 2:
		return `"int"`, diffInt
	case 3:
		lt := []string{"date", "time-millis"}[g.rng.IntN(2)]
		return `{"type":"int","logicalType":"` + lt + `"}`, diffInt
	case 4:
		return `"long"`, diffLong
	case 5:
		lt := []string{"time-micros", "timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"}[g.rng.IntN(5)]
		return `{"type":"long","logicalType":"` + lt + `"}`, diffLong
	case 6:
		return `"float"`, func(g *diffGen, _ int, def bool) diffOut {
			f := []float32{0, float32(math.Copysign(0, -1)), 1.5, math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}[g.rng.IntN(8)]
			if g.rng.IntN(2) == 0 || def && (math.IsInf(float64(f), 0) || f != f) {
				f = float32(g.rng.NormFloat64() * 1e6)
			}
			js := string(appendFloat(nil, float64(f), 32))
			return diffOut{f, js, js, ""}
		}
	case 7:
		return `"double"`, func(g *diffGen, _ int, def bool) diffOut {
			f := []float64{0, math.Copysign(0, -1), 0.1, math.MaxFloat64, 5e-324, math.Inf(1), math.Inf(-1), math.NaN(), 1e21}[g.rng.IntN(9)]
			if g.rng.IntN(2) == 0 || def && (math.IsInf(f, 0) || f != f) {
				f = g.rng.NormFloat64() * 1e12
			}
			js := string(appendFloat(nil, f, 64))
			return diffOut{f, js, js, ""}
		}
	case 8:
		return `"string"`, diffString
	case 9:
		return `{"type":"string","logicalType":"uuid"}`, func(g *diffGen, _ int, _ bool) diffOut {
			b := make([]byte, 16)
			for i := range b {
				b[i] = byte(g.rng.IntN(256))
			}
			s := fmt.Sprintf("%x-%x-%x-%x-%x", b[:4], b[4:6], b[6:8], b[8:10], b[10:])
			return diffOut{s, strconv.Quote(s), strconv.Quote(s), ""}
		}
	case 10:
		return `"bytes"`, func(g *diffGen, _ int, _ bool) diffOut { return g.bytes(g.rng.IntN(6)) }
	case 11:
		prec := 1 + g.rng.IntN(30)
		scale := g.rng.IntN(prec + 1)
		return fmt.Sprintf(`{"type":"bytes","logicalType":"decimal","precision":%d,"scale":%d}`, prec, scale),
			func(g *diffGen, _ int, _ bool) diffOut { return g.decimal(prec, scale, -1) }
	}
	return g.fixed(ns)
}

// diffInt makes an int, at its edges now and then.
func diffInt(g *diffGen, _ int, _ bool) diffOut {
	n := int32(g.rng.Uint32())
	if g.rng.IntN(3) == 0 {
		n = []int32{0, -1, math.MaxInt32, math.MinInt32, 63, 64, -64, -65}[g.rng.IntN(8)]
	}
	js := strconv.FormatInt(int64(n), 10)
	return diffOut{n, js, js, ""}
}

// diffLong makes a long, at its edges now and then.
func diffLong(g *diffGen, _ int, _ bool) diffOut {
	n := int64(g.rng.Uint64()) >> g.rng.IntN(64)
	if g.rng.IntN(3) == 0 {
		n = []int64{0, -1, math.MaxInt64, math.MinInt64, 1<<53 + 1, -(1 << 53) - 1}[g.rng.IntN(6)]
	}
	js := strconv.FormatInt(n, 10)
	return diffOut{n, js, js, ""}
}

// diffString makes a string: escapes, non-ASCII, astral.
func diffString(g *diffGen, _ int, _ bool) diffOut {
	s := []string{"", "plain", "quote\" and \\ slash", "ünïcødé ☃", "tab\tnew\nline", "\x00\x1f", "😀", "<&>", "\u2028"}[g.rng.IntN(9)]
	q, _ := jsontext.AppendQuote(nil, s)
	return diffOut{s, string(q), string(q), ""}
}

// bytes makes n random bytes, their base64, and Avro's JSON for bytes
// (a string of one code point per byte).
func (g *diffGen) bytes(n int) diffOut {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.rng.IntN(256))
	}
	return diffOut{b, strconv.Quote(base64.StdEncoding.EncodeToString(b)), avroJSONBytes(b), ""}
}

// avroJSONBytes is b in Avro's JSON: a string of one code point a byte.
func avroJSONBytes(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		fmt.Fprintf(&sb, "\\u%04x", c)
	}
	sb.WriteByte('"')
	return sb.String()
}

// decimal makes a decimal of at most prec digits with scale digits
// after the point: a *big.Rat, the string the codec writes, and its
// bytes in Avro's JSON (size bytes for a fixed, -1 for bytes).
func (g *diffGen) decimal(prec, scale, size int) diffOut {
	digits := make([]byte, 1+g.rng.IntN(prec))
	for i := range digits {
		digits[i] = byte('0' + g.rng.IntN(10))
	}
	n, _ := new(big.Int).SetString(string(digits), 10)
	if g.rng.IntN(2) == 0 {
		n.Neg(n)
	}
	r := new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	b := twosComplement(n, size)
	return diffOut{r, string(appendDecimal(nil, b, scale)), avroJSONBytes(b), ""}
}
