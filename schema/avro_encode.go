package schema

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
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

// writer returns a pooled, empty Writer.
func (c *avroCodec) writer() *avro.Writer {
	w, _ := c.writers.Get().(*avro.Writer)
	if w == nil {
		w = avro.NewWriter(nil, 256)
	}
	w.Reset(nil)
	w.Error = nil
	return w
}

// encode appends the Avro binary of the plain JSON js to dst.
func (c *avroCodec) encode(dst, js []byte) ([]byte, error) {
	v, err := c.parser.parse(js)
	if err != nil {
		return dst, err
	}
	w := c.writer()
	defer c.writers.Put(w)
	if err := c.write(w, c.schema, v, 0); err != nil {
		return dst, err
	}
	return append(dst, w.Buffer()...), nil
}

// write writes v as a value of schema s.
func (c *avroCodec) write(w *avro.Writer, s avro.Schema, v any, depth int) error {
	if depth > maxAvroDepth {
		return misfit("values nest too deeply")
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return c.write(w, s.Schema(), v, depth+1)
	case *avro.PrimitiveSchema:
		return writePrimitive(w, s, v)
	case *avro.RecordSchema:
		return c.writeRecord(w, s, v, depth)
	case *avro.EnumSchema:
		str, ok := v.(string)
		if !ok {
			return misfit("%s is not a symbol of enum %s", describe(v), s.FullName())
		}
		for i, sym := range s.Symbols() {
			if sym == str {
				w.WriteInt(int32(i))
				return nil
			}
		}
		return misfit("%s is not a symbol of enum %s (%s)", describe(v), s.FullName(), strings.Join(s.Symbols(), ", "))
	case *avro.ArraySchema:
		arr, ok := v.([]any)
		if !ok {
			return misfit("%s is not an array", describe(v))
		}
		if len(arr) > 0 {
			w.WriteLong(int64(len(arr)))
			for i, item := range arr {
				if err := c.write(w, s.Items(), item, depth+1); err != nil {
					return under("["+strconv.Itoa(i)+"]", err)
				}
			}
		}
		w.WriteLong(0)
		return nil
	case *avro.MapSchema:
		return c.writeMap(w, s, v, depth)
	case *avro.UnionSchema:
		return c.writeUnion(w, s, v, depth)
	case *avro.FixedSchema:
		return writeFixed(w, s, v)
	}
	return misfit("unsupported schema type %s", s.Type())
}

// writeRecord writes a JSON object as a record: every field of the
// schema in order, a missing one as its default; a key that is not a
// field is an error.
func (c *avroCodec) writeRecord(w *avro.Writer, s *avro.RecordSchema, v any, depth int) error {
	o, ok := v.(*jsonObject)
	if !ok {
		return misfit("%s is not an object (record %s)", describe(v), s.FullName())
	}
	found := 0
	for _, f := range s.Fields() {
		fv, ok := o.get(f.Name())
		if !ok {
			def, has := c.defaults[f]
			if !has {
				return &fieldError{path: f.Name(), msg: "missing, and the schema gives it no default"}
			}
			w.Write(def)
			continue
		}
		found++
		if err := c.write(w, f.Type(), fv, depth+1); err != nil {
			return under(f.Name(), err)
		}
	}
	if found < len(o.keys) {
		for _, k := range o.keys {
			if !hasField(s, k) {
				return &fieldError{path: k, msg: "not in the schema (record " + s.FullName() + ")"}
			}
		}
		return misfit("an object key is repeated (record %s)", s.FullName())
	}
	return nil
}

// hasField reports whether record s has a field name.
func hasField(s *avro.RecordSchema, name string) bool {
	for _, f := range s.Fields() {
		if f.Name() == name {
			return true
		}
	}
	return false
}

// writeMap writes a JSON object as a map, in the object's key order.
func (c *avroCodec) writeMap(w *avro.Writer, s *avro.MapSchema, v any, depth int) error {
	o, ok := v.(*jsonObject)
	if !ok {
		return misfit("%s is not an object (map)", describe(v))
	}
	if len(o.keys) > 0 {
		w.WriteLong(int64(len(o.keys)))
		for i, k := range o.keys {
			w.WriteString(k)
			if err := c.write(w, s.Values(), o.vals[i], depth+1); err != nil {
				return under(k, err)
			}
		}
	}
	w.WriteLong(0)
	return nil
}

// writeUnion writes null as the null branch, a value of a nullable
// union as its other branch, else {"<branch name>": value}.
func (c *avroCodec) writeUnion(w *avro.Writer, s *avro.UnionSchema, v any, depth int) error {
	types := s.Types()
	if v == nil {
		for i, t := range types {
			if t.Type() == avro.Null {
				w.WriteLong(int64(i))
				return nil
			}
		}
		return misfit("null is not allowed: the union has no null branch")
	}
	if s.Nullable() {
		_, typ := s.Indices()
		w.WriteLong(int64(typ))
		return c.write(w, types[typ], v, depth+1)
	}
	o, ok := v.(*jsonObject)
	if !ok || len(o.keys) != 1 {
		return misfit("%s is not a union value: give {\"<branch>\": value} with one of %s", describe(v), branchNames(types))
	}
	for i, t := range types {
		if branchName(t) == o.keys[0] {
			w.WriteLong(int64(i))
			return under(o.keys[0], c.write(w, t, o.vals[0], depth+1))
		}
	}
	return misfit("%q is not a branch of the union (%s)", o.keys[0], branchNames(types))
}

// branchNames lists a union's branch keys.
func branchNames(types avro.Schemas) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = branchName(t)
	}
	return strings.Join(names, ", ")
}

// writePrimitive writes one primitive value.
func writePrimitive(w *avro.Writer, s *avro.PrimitiveSchema, v any) error {
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return misfit("%s is not null", describe(v))
		}
		return nil
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return misfit("%s is not a boolean", describe(v))
		}
		w.WriteBool(b)
		return nil
	case avro.Int:
		n, err := exactInt(v, 32, "an int")
		w.WriteInt(int32(n))
		return err
	case avro.Long:
		n, err := exactInt(v, 64, "a long")
		w.WriteLong(n)
		return err
	case avro.Float:
		f, err := jsonFloat(v, 32, "a float")
		w.WriteFloat(float32(f))
		return err
	case avro.Double:
		f, err := jsonFloat(v, 64, "a double")
		w.WriteDouble(f)
		return err
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return misfit("%s is not a string", describe(v))
		}
		w.WriteString(str)
		return nil
	case avro.Bytes:
		b, err := jsonBytes(v, s.Logical(), -1)
		w.WriteBytes(b)
		return err
	}
	return misfit("unsupported primitive %s", s.Type())
}

// writeFixed writes a fixed value (base64, or a decimal string).
func writeFixed(w *avro.Writer, s *avro.FixedSchema, v any) error {
	b, err := jsonBytes(v, s.Logical(), s.Size())
	if err != nil {
		return err
	}
	if len(b) != s.Size() {
		return misfit("%d bytes, not the %d of fixed %s", len(b), s.Size(), s.FullName())
	}
	_, _ = w.Write(b)
	return nil
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

// jsonBytes reads bytes or fixed: a decimal string when logical is a
// decimal, else standard base64. size is the fixed size, -1 for bytes.
func jsonBytes(v any, logical avro.LogicalSchema, size int) ([]byte, error) {
	if d, ok := logical.(*avro.DecimalLogicalSchema); ok {
		return decimalBytes(v, d, size)
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
func decimalBytes(v any, d *avro.DecimalLogicalSchema, size int) ([]byte, error) {
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
	if len(frac) > d.Scale() {
		return nil, misfit("%s has more than %d digits after the point", describe(v), d.Scale())
	}
	unscaled := strings.TrimLeft(whole+frac+strings.Repeat("0", d.Scale()-len(frac)), "0")
	if len(unscaled) > d.Precision() {
		return nil, misfit("%s has more than the %d digits of decimal(%d,%d)", describe(v), d.Precision(), d.Precision(), d.Scale())
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
