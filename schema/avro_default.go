package schema

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
)

// encodeDefaults encodes, once, the default of every record field of
// the tree that has one, so that a missing field costs a copy; it also
// gives the JSON parser the field names to intern.
func (c *avroCodec) encodeDefaults(t *avroTree) error {
	for _, n := range t.named {
		for i := range n.fields {
			c.parser.names[n.fields[i].name] = n.fields[i].name
		}
	}
	for _, tf := range t.fields {
		f := tf.field
		def, err := c.encodeDefault(nil, f.typ, f.raw, 0)
		if err != nil {
			return fmt.Errorf("record %s field %s: default: %w", tf.record.typ, f.name, err)
		}
		f.def = def
	}
	for _, tf := range t.fields {
		tf.field.raw = nil
	}
	return nil
}

// encodeDefault appends the binary of a default as twmb/avro gives it
// (int32, int64, float32, float64, bool, string, []byte, []any,
// map[string]any, nil), through the plain JSON values that write takes
// for scalars, so that a default is held to the same rules as a value.
// A union's default is of the first branch that takes it, as twmb/avro
// reads it.
func (c *avroCodec) encodeDefault(dst []byte, s *avroNode, def any, depth int) ([]byte, error) {
	if depth > maxAvroDepth {
		return dst, misfit("the default nests too deeply")
	}
	switch s.kind {
	case avroUnion:
		var first error
		for i, b := range s.branches {
			out, err := c.encodeDefault(appendVarint(dst, int64(i)), b, def, depth+1)
			if err == nil {
				return out, nil
			}
			if first == nil {
				first = err
			}
		}
		return dst, first
	case avroRecord:
		return c.encodeRecordDefault(dst, s, def, depth)
	case avroMap:
		m, ok := def.(map[string]any)
		if !ok {
			return dst, misfit("%T is not a map default", def)
		}
		if len(m) > 0 {
			dst = appendVarint(dst, int64(len(m)))
			for _, k := range sortedKeys(m) {
				dst = appendAvroString(dst, k)
				var err error
				if dst, err = c.encodeDefault(dst, s.items, m[k], depth+1); err != nil {
					return dst, under(k, err)
				}
			}
		}
		return append(dst, 0), nil
	case avroArray:
		arr, ok := def.([]any)
		if !ok {
			return dst, misfit("%T is not an array default", def)
		}
		if len(arr) > 0 {
			dst = appendVarint(dst, int64(len(arr)))
			for i, item := range arr {
				var err error
				if dst, err = c.encodeDefault(dst, s.items, item, depth+1); err != nil {
					return dst, under("["+strconv.Itoa(i)+"]", err)
				}
			}
		}
		return append(dst, 0), nil
	case avroBytes, avroFixed:
		b, ok := def.([]byte)
		if !ok {
			return dst, misfit("%T is not a bytes default", def)
		}
		return c.write(dst, s, plainBytes(b, s), depth)
	}
	if !defaultFits(s.kind, def) {
		return dst, misfit("%T is not a %s default", def, s.typ)
	}
	return c.write(dst, s, plainScalar(def), depth)
}

// encodeRecordDefault is encodeDefault of a record: each field from the
// default's member, or from the field's own default where it has none.
func (c *avroCodec) encodeRecordDefault(dst []byte, s *avroNode, def any, depth int) ([]byte, error) {
	m, ok := def.(map[string]any)
	if !ok {
		return dst, misfit("%T is not a record default", def)
	}
	for i := range s.fields {
		f := &s.fields[i]
		v, ok := m[f.name]
		if !ok {
			if !f.hasDefault {
				return dst, &fieldError{path: f.name, msg: "missing, and the schema gives it no default"}
			}
			v = f.raw
			if v == nil && f.def != nil {
				dst = append(dst, f.def...)
				continue
			}
		}
		var err error
		if dst, err = c.encodeDefault(dst, f.typ, v, depth+1); err != nil {
			return dst, under(f.name, err)
		}
	}
	return dst, nil
}

// defaultFits reports whether a scalar default has the Go type twmb/avro
// gives a default of kind k, so that a union's default takes the branch
// twmb/avro chose (["int","float"] with 42 is an int, with 4.2 a float).
func defaultFits(k avroKind, def any) bool {
	switch def.(type) {
	case nil:
		return k == avroNull
	case bool:
		return k == avroBoolean
	case int32:
		return k == avroInt
	case int64:
		return k == avroLong
	case float32:
		return k == avroFloat
	case float64:
		return k == avroDouble
	case string:
		return k == avroString || k == avroEnum
	}
	return false
}

// plainBytes is bytes in plain JSON form: a decimal string or base64.
func plainBytes(b []byte, s *avroNode) any {
	if s.decimal {
		str := string(appendDecimal(nil, b, s.scale))
		return str[1 : len(str)-1]
	}
	return base64.StdEncoding.EncodeToString(b)
}

// plainScalar converts a scalar default to plain JSON form.
func plainScalar(def any) any {
	switch d := def.(type) {
	case int32:
		return jsonNumber(strconv.FormatInt(int64(d), 10))
	case int64:
		return jsonNumber(strconv.FormatInt(d, 10))
	case float32:
		return plainFloat(float64(d), 32)
	case float64:
		return plainFloat(d, 64)
	}
	return def
}

// plainFloat is a float default in plain JSON form (NaN and the
// infinities as strings).
func plainFloat(f float64, bits int) any {
	s := string(appendFloat(nil, f, bits))
	if s[0] == '"' {
		return s[1 : len(s)-1]
	}
	return jsonNumber(s)
}

// sortedKeys returns m's keys in order, so that a map default encodes
// the same way every time.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
