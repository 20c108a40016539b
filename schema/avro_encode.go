package schema

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// fieldError is a value that does not fit the schema, at a path of
// record fields.
type fieldError struct {
	path string
	msg  string
}

// Error names the field (when there is one) and what is wrong.
func (e *fieldError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return "field " + e.path + ": " + e.msg
}

// misfit returns a fieldError at the top level.
func misfit(format string, args ...any) error {
	return &fieldError{msg: fmt.Errorf(format, args...).Error()}
}

// under puts err under the record field name.
func under(name string, err error) error {
	if fe, ok := err.(*fieldError); ok {
		p := name
		switch {
		case strings.HasPrefix(fe.path, "["):
			p = name + fe.path
		case fe.path != "":
			p = name + "." + fe.path
		}
		return &fieldError{path: p, msg: fe.msg}
	}
	return err
}

// encode appends the Avro binary of the plain JSON js to dst; on an
// error dst is returned as it was.
func (c *avroCodec) encode(dst, js []byte) ([]byte, error) {
	v, err := c.parser.parse(js)
	if err != nil {
		return dst, err
	}
	out, err := c.write(dst, c.root, v, 0)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// write appends v as a value of schema s.
func (c *avroCodec) write(dst []byte, s *avroNode, v any, depth int) ([]byte, error) {
	if depth > maxAvroDepth {
		return dst, misfit("values nest too deeply")
	}
	switch s.kind {
	case avroRecord:
		return c.writeRecord(dst, s, v, depth)
	case avroEnum:
		str, ok := v.(string)
		if !ok {
			return dst, misfit("%s is not a symbol of enum %s", describe(v), s.typ)
		}
		for i, sym := range s.symbols {
			if sym == str {
				return appendVarint(dst, int64(i)), nil
			}
		}
		return dst, misfit("%s is not a symbol of enum %s (%s)", describe(v), s.typ, strings.Join(s.symbols, ", "))
	case avroArray:
		arr, ok := v.([]any)
		if !ok {
			return dst, misfit("%s is not an array", describe(v))
		}
		if len(arr) > 0 {
			dst = appendVarint(dst, int64(len(arr)))
			for i, item := range arr {
				var err error
				if dst, err = c.write(dst, s.items, item, depth+1); err != nil {
					return dst, under("["+strconv.Itoa(i)+"]", err)
				}
			}
		}
		return append(dst, 0), nil
	case avroMap:
		return c.writeMap(dst, s, v, depth)
	case avroUnion:
		return c.writeUnion(dst, s, v, depth)
	case avroFixed:
		return writeFixed(dst, s, v)
	}
	return writePrimitive(dst, s, v)
}

// writeRecord writes a JSON object as a record: every field of the
// schema in order, a missing one as its default; a key that is not a
// field is an error.
func (c *avroCodec) writeRecord(dst []byte, s *avroNode, v any, depth int) ([]byte, error) {
	o, ok := v.(*jsonObject)
	if !ok {
		return dst, misfit("%s is not an object (record %s)", describe(v), s.typ)
	}
	found := 0
	for i := range s.fields {
		f := &s.fields[i]
		fv, ok := o.get(f.name)
		if !ok {
			if !f.hasDefault {
				return dst, &fieldError{path: f.name, msg: "missing, and the schema gives it no default"}
			}
			dst = append(dst, f.def...)
			continue
		}
		found++
		var err error
		if dst, err = c.write(dst, f.typ, fv, depth+1); err != nil {
			return dst, under(f.name, err)
		}
	}
	if found < len(o.keys) {
		for _, k := range o.keys {
			if !hasField(s, k) {
				return dst, &fieldError{path: k, msg: "not in the schema (record " + s.typ + ")"}
			}
		}
		return dst, misfit("an object key is repeated (record %s)", s.typ)
	}
	return dst, nil
}

// hasField reports whether record s has a field name.
func hasField(s *avroNode, name string) bool {
	for i := range s.fields {
		if s.fields[i].name == name {
			return true
		}
	}
	return false
}

// writeMap writes a JSON object as a map, in the object's key order.
func (c *avroCodec) writeMap(dst []byte, s *avroNode, v any, depth int) ([]byte, error) {
	o, ok := v.(*jsonObject)
	if !ok {
		return dst, misfit("%s is not an object (map)", describe(v))
	}
	if len(o.keys) > 0 {
		dst = appendVarint(dst, int64(len(o.keys)))
		for i, k := range o.keys {
			dst = appendAvroString(dst, k)
			var err error
			if dst, err = c.write(dst, s.items, o.vals[i], depth+1); err != nil {
				return dst, under(k, err)
			}
		}
	}
	return append(dst, 0), nil
}

// writeUnion writes null as the null branch, a value of a nullable
// union as its other branch, else {"<branch name>": value}.
func (c *avroCodec) writeUnion(dst []byte, s *avroNode, v any, depth int) ([]byte, error) {
	if v == nil {
		if s.nullAt < 0 {
			return dst, misfit("null is not allowed: the union has no null branch")
		}
		return appendVarint(dst, int64(s.nullAt)), nil
	}
	if s.nullable {
		return c.write(appendVarint(dst, int64(s.valueAt)), s.branches[s.valueAt], v, depth+1)
	}
	o, ok := v.(*jsonObject)
	if !ok || len(o.keys) != 1 {
		return dst, misfit("%s is not a union value: give {\"<branch>\": value} with one of %s", describe(v), branchNames(s.branches))
	}
	for i, t := range s.branches {
		if t.typ == o.keys[0] {
			out, err := c.write(appendVarint(dst, int64(i)), t, o.vals[0], depth+1)
			return out, under(o.keys[0], err)
		}
	}
	return dst, misfit("%q is not a branch of the union (%s)", o.keys[0], branchNames(s.branches))
}

// branchNames lists a union's branch keys.
func branchNames(types []*avroNode) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = t.typ
	}
	return strings.Join(names, ", ")
}

// writePrimitive writes one primitive value.
func writePrimitive(dst []byte, s *avroNode, v any) ([]byte, error) {
	switch s.kind {
	case avroNull:
		if v != nil {
			return dst, misfit("%s is not null", describe(v))
		}
		return dst, nil
	case avroBoolean:
		b, ok := v.(bool)
		if !ok {
			return dst, misfit("%s is not a boolean", describe(v))
		}
		return appendAvroBool(dst, b), nil
	case avroInt:
		n, err := exactInt(v, 32, "an int")
		return appendVarint(dst, n), err
	case avroLong:
		n, err := exactInt(v, 64, "a long")
		return appendVarint(dst, n), err
	case avroFloat:
		f, err := jsonFloat(v, 32, "a float")
		return appendAvroFloat(dst, float32(f)), err
	case avroDouble:
		f, err := jsonFloat(v, 64, "a double")
		return appendAvroDouble(dst, f), err
	case avroString:
		str, ok := v.(string)
		if !ok {
			return dst, misfit("%s is not a string", describe(v))
		}
		return appendAvroString(dst, str), nil
	case avroBytes:
		b, err := jsonBytes(v, s, -1)
		return appendAvroBytes(dst, b), err
	}
	return dst, misfit("unsupported primitive %s", s.typ)
}

// writeFixed writes a fixed value (base64, or a decimal string).
func writeFixed(dst []byte, s *avroNode, v any) ([]byte, error) {
	b, err := jsonBytes(v, s, s.size)
	if err != nil {
		return dst, err
	}
	if len(b) != s.size {
		return dst, misfit("%d bytes, not the %d of fixed %s", len(b), s.size, s.typ)
	}
	return append(dst, b...), nil
}

// exactInt reads a JSON number that must be an integer of bits bits.
func exactInt(v any, bits int, what string) (int64, error) {
	num, ok := v.(jsonNumber)
	if !ok {
		return 0, misfit("%s is not %s", describe(v), what)
	}
	n, err := strconv.ParseInt(string(num), 10, bits)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, misfit("%s is out of the range of %s", num, what)
		}
		return 0, misfit("%s is not %s", num, what)
	}
	return n, nil
}

// jsonFloat reads a JSON number, or "NaN", "Infinity" or "-Infinity".
func jsonFloat(v any, bits int, what string) (float64, error) {
	switch v := v.(type) {
	case jsonNumber:
		f, err := strconv.ParseFloat(string(v), bits)
		if err != nil {
			return 0, misfit("%s is out of the range of %s", v, what)
		}
		return f, nil
	case string:
		switch v {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, misfit("%s is not %s", describe(v), what)
}

// jsonBytes reads bytes or fixed: a decimal string when s is a
// decimal, else standard base64. size is the fixed size, -1 for bytes.
func jsonBytes(v any, s *avroNode, size int) ([]byte, error) {
	if s.decimal {
		return decimalBytes(v, s, size)
	}
	str, ok := v.(string)
	if !ok {
		return nil, misfit("%s is not a base64 string", describe(v))
	}
	b, err := base64.StdEncoding.DecodeString(str)
	if err != nil {
		return nil, misfit("%s is not standard base64: %v", describe(v), err)
	}
	return b, nil
}

// decimalBytes turns an exact decimal ("12.34", or a JSON number) into
// its two's-complement unscaled bytes; more digits after the point than
// the scale, or than the precision in all, is an error.
func decimalBytes(v any, d *avroNode, size int) ([]byte, error) {
	var text string
	switch v := v.(type) {
	case string:
		text = v
	case jsonNumber:
		text = string(v)
	default:
		return nil, misfit("%s is not a decimal string", describe(v))
	}
	neg := strings.HasPrefix(text, "-")
	digits := strings.TrimPrefix(text, "-")
	whole, frac, _ := strings.Cut(digits, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) || (strings.Contains(digits, ".") && frac == "") {
		return nil, misfit("%s is not a decimal (digits, optionally a point and more digits)", describe(v))
	}
	if len(frac) > d.scale {
		return nil, misfit("%s has more than %d digits after the point", describe(v), d.scale)
	}
	unscaled := strings.TrimLeft(whole+frac+strings.Repeat("0", d.scale-len(frac)), "0")
	if len(unscaled) > d.precision {
		return nil, misfit("%s has more than the %d digits of decimal(%d,%d)", describe(v), d.precision, d.precision, d.scale)
	}
	n, _ := new(big.Int).SetString("0"+unscaled, 10)
	if neg {
		n.Neg(n)
	}
	return twosComplement(n, size), nil
}

// allDigits reports whether s is only ASCII digits.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// twosComplement returns n big-endian in the fewest bytes that hold its
// sign, or in size bytes (sign-extended) when size > 0.
func twosComplement(n *big.Int, size int) []byte {
	l := n.BitLen()/8 + 1
	if n.Sign() < 0 {
		l = new(big.Int).Not(n).BitLen()/8 + 1 // ^n is -n-1
	}
	if size > 0 {
		if l > size {
			l = size + 1 // does not fit: the caller reports the length
		} else {
			l = size
		}
	}
	out := make([]byte, l)
	if n.Sign() >= 0 {
		n.FillBytes(out)
		return out
	}
	m := new(big.Int).Add(n, new(big.Int).Lsh(big.NewInt(1), uint(l)*8))
	m.FillBytes(out)
	return out
}
