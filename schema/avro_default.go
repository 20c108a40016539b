package schema

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"strconv"

	"github.com/hamba/avro/v2"
)

// encodeDefaults encodes, once, the default of every record field of s
// that has one, so that a missing field costs a copy; it also gives the
// JSON parser the field names to intern.
func (c *avroCodec) encodeDefaults(s avro.Schema, seen map[avro.Schema]bool) error {
	if seen[s] {
		return nil
	}
	seen[s] = true
	switch s := s.(type) {
	case *avro.RecordSchema:
		for _, f := range s.Fields() {
			c.parser.names[f.Name()] = f.Name()
			if err := c.encodeDefaults(f.Type(), seen); err != nil {
				return err
			}
			if !f.HasDefault() {
				continue
			}
			if err := c.encodeDefault(f); err != nil {
				return fmt.Errorf("record %s field %s: default: %w", s.FullName(), f.Name(), err)
			}
		}
	case *avro.ArraySchema:
		return c.encodeDefaults(s.Items(), seen)
	case *avro.MapSchema:
		return c.encodeDefaults(s.Values(), seen)
	case *avro.UnionSchema:
		for _, t := range s.Types() {
			if err := c.encodeDefaults(t, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// encodeDefault encodes field f's default, which hamba/avro has checked
// and converted to Go values, by turning it into plain JSON form first.
func (c *avroCodec) encodeDefault(f *avro.Field) error {
	typ := f.Type()
	v := plainDefault(typ, f.Default())
	w := avro.NewWriter(nil, 64)
	if err := c.write(w, typ, v, 0); err != nil {
		return err
	}
	c.defaults[f] = append([]byte(nil), w.Buffer()...)
	return nil
}

// plainDefault converts a default as hamba/avro holds it (int, int64,
// float32, []byte, [N]byte arrays, map[string]any...) to the plain JSON
// values that write takes.
func plainDefault(s avro.Schema, def any) any {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if u, ok := s.(*avro.UnionSchema); ok {
		// A union's default is of its first branch; outside a nullable
		// union, plain JSON names the branch.
		first := u.Types()[0]
		if first.Type() == avro.Null {
			return nil
		}
		v := plainDefault(first, def)
		if u.Nullable() {
			return v
		}
		return &jsonObject{keys: []string{branchName(first)}, vals: []any{v}}
	}
	switch s := s.(type) {
	case *avro.RecordSchema:
		m, _ := def.(map[string]any)
		o := &jsonObject{}
		for _, f := range s.Fields() {
			if fv, ok := m[f.Name()]; ok {
				o.keys = append(o.keys, f.Name())
				o.vals = append(o.vals, plainDefault(f.Type(), fv))
			}
		}
		return o
	case *avro.MapSchema:
		m, _ := def.(map[string]any)
		o := &jsonObject{}
		for _, k := range sortedKeys(m) {
			o.keys = append(o.keys, k)
			o.vals = append(o.vals, plainDefault(s.Values(), m[k]))
		}
		return o
	case *avro.ArraySchema:
		arr, _ := def.([]any)
		out := make([]any, len(arr))
		for i, item := range arr {
			out[i] = plainDefault(s.Items(), item)
		}
		return out
	case *avro.FixedSchema:
		return plainBytes(fixedBytes(def), s.Logical())
	case *avro.PrimitiveSchema:
		if s.Type() == avro.Bytes {
			b, _ := def.([]byte)
			return plainBytes(b, s.Logical())
		}
	}
	return plainScalar(def)
}

// plainBytes is bytes in plain JSON form: a decimal string or base64.
func plainBytes(b []byte, logical avro.LogicalSchema) any {
	if d, ok := logical.(*avro.DecimalLogicalSchema); ok {
		s := string(appendDecimal(nil, b, d.Scale()))
		return s[1 : len(s)-1]
	}
	return base64.StdEncoding.EncodeToString(b)
}

// fixedBytes returns the bytes of a fixed default ([N]byte or []byte).
func fixedBytes(def any) []byte {
	switch d := def.(type) {
	case []byte:
		return d
	case string:
		return []byte(d)
	}
	rv := reflectBytes(def)
	return rv
}

// plainScalar converts a scalar default to plain JSON form.
func plainScalar(def any) any {
	switch d := def.(type) {
	case int:
		return jsonNumber(strconv.Itoa(d))
	case int32:
		return jsonNumber(strconv.FormatInt(int64(d), 10))
	case int64:
		return jsonNumber(strconv.FormatInt(d, 10))
	case float32:
		return jsonNumber(strconv.FormatFloat(float64(d), 'g', -1, 32))
	case float64:
		return jsonNumber(strconv.FormatFloat(d, 'g', -1, 64))
	case *big.Rat:
		return d.FloatString(10)
	}
	return def
}
