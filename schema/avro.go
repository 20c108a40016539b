package schema

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/hamba/avro/v2"
)

// avroCodec maps Avro binary to plain JSON and back, walking the schema
// that hamba/avro parsed and reading and writing with its Reader and
// Writer. Plain JSON (docs/schemas.md) is not Avro's JSON encoding, so
// the walk is ours; the binary encoding is the library's.
type avroCodec struct {
	schema   avro.Schema
	readers  sync.Pool // of *avro.Reader
	writers  sync.Pool // of *avro.Writer
	parser   jsonParser
	defaults map[*avro.Field][]byte // a field's default, encoded
}

// compileAvro parses s with its referenced named types (parsed first,
// into a cache of this schema's own).
func compileAvro(s Schema, refs []namedSchema) (codec, error) {
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if r.schema.Type != Avro {
			return nil, fmt.Errorf("reference %q is a %s schema, not avro", r.name, r.schema.Type)
		}
		if _, err := avro.ParseWithCache(r.schema.Text, "", cache); err != nil {
			return nil, fmt.Errorf("reference %q: %w", r.name, err)
		}
	}
	sch, err := avro.ParseWithCache(s.Text, "", cache)
	if err != nil {
		return nil, err
	}
	c := &avroCodec{schema: sch, defaults: make(map[*avro.Field][]byte)}
	c.parser.names = make(map[string]string)
	if err := c.encodeDefaults(sch, make(map[avro.Schema]bool)); err != nil {
		return nil, err
	}
	return c, nil
}

// index is nil: Avro headers carry no message indexes.
func (c *avroCodec) index() []int { return nil }

// reader returns a pooled Reader over b.
func (c *avroCodec) reader(b []byte) *avro.Reader {
	r, _ := c.readers.Get().(*avro.Reader)
	if r == nil {
		r = avro.NewReader(nil, 0)
	}
	r.Error = nil
	return r.Reset(b)
}

// decode appends the plain JSON form of payload to dst.
func (c *avroCodec) decode(payload []byte, _ []int, dst []byte) ([]byte, error) {
	r := c.reader(payload)
	defer c.readers.Put(r)
	start := len(dst)
	out := appendAvro(dst, r, c.schema, 0)
	if r.Error != nil {
		return dst[:start], r.Error
	}
	var one [1]byte
	if r.Read(one[:]); r.Error == nil {
		return dst[:start], fmt.Errorf("bytes are left after the value: the payload is longer than the schema's value")
	}
	return out, nil
}

// maxAvroDepth bounds how deep values nest (recursive schemas).
const maxAvroDepth = 1000

// appendAvro reads one value of schema s from r and appends its JSON.
// Errors are left in r.Error.
func appendAvro(dst []byte, r *avro.Reader, s avro.Schema, depth int) []byte {
	if depth > maxAvroDepth {
		r.ReportError("decode", "values nest too deeply")
		return dst
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return appendAvro(dst, r, s.Schema(), depth+1)
	case *avro.PrimitiveSchema:
		return appendPrimitive(dst, r, s)
	case *avro.RecordSchema:
		dst = append(dst, '{')
		for i, f := range s.Fields() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst, _ = jsontext.AppendQuote(dst, f.Name())
			dst = append(dst, ':')
			dst = appendAvro(dst, r, f.Type(), depth+1)
			if r.Error != nil {
				return dst
			}
		}
		return append(dst, '}')
	case *avro.EnumSchema:
		i := r.ReadInt()
		sym, ok := s.Symbol(int(i))
		if !ok && r.Error == nil {
			r.ReportError("decode", "enum "+s.FullName()+": symbol index "+strconv.Itoa(int(i))+" out of range")
		}
		dst, _ = jsontext.AppendQuote(dst, sym)
		return dst
	case *avro.ArraySchema:
		return appendBlocks(dst, r, '[', ']', func(dst []byte) []byte { return appendAvro(dst, r, s.Items(), depth+1) })
	case *avro.MapSchema:
		return appendBlocks(dst, r, '{', '}', func(dst []byte) []byte {
			dst = appendString(dst, r, r.ReadString())
			dst = append(dst, ':')
			return appendAvro(dst, r, s.Values(), depth+1)
		})
	case *avro.UnionSchema:
		return appendUnion(dst, r, s, depth)
	case *avro.FixedSchema:
		b := make([]byte, s.Size())
		r.Read(b)
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return appendDecimal(dst, b, d.Scale())
		}
		return appendBase64(dst, b)
	}
	r.ReportError("decode", "unsupported schema type "+string(s.Type()))
	return dst
}

// maxBlockItems bounds the items of one array or map block, so that a
// corrupt count of items that take no bytes (nulls) cannot spin.
const maxBlockItems = 1 << 20

// appendBlocks reads the blocks of an array or map, each item with item.
func appendBlocks(dst []byte, r *avro.Reader, open, close byte, item func([]byte) []byte) []byte {
	dst = append(dst, open)
	first := true
	for {
		n, _ := r.ReadBlockHeader()
		if n == 0 || r.Error != nil {
			break
		}
		if n < 0 || n > maxBlockItems {
			r.ReportError("decode", "a block claims "+strconv.FormatInt(n, 10)+" items, more than the "+strconv.Itoa(maxBlockItems)+" allowed")
			return dst
		}
		for ; n > 0; n-- {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = item(dst)
			if r.Error != nil {
				return dst
			}
		}
	}
	return append(dst, close)
}

// appendUnion reads a union: null as null, the other branch of a
// nullable union as its value, any other branch as {"<name>": value}.
func appendUnion(dst []byte, r *avro.Reader, s *avro.UnionSchema, depth int) []byte {
	i := r.ReadLong()
	types := s.Types()
	if i < 0 || i >= int64(len(types)) {
		if r.Error == nil {
			r.ReportError("decode", "union branch "+strconv.FormatInt(i, 10)+" out of range")
		}
		return dst
	}
	branch := types[i]
	if branch.Type() == avro.Null {
		return append(dst, "null"...)
	}
	if s.Nullable() {
		return appendAvro(dst, r, branch, depth+1)
	}
	dst = append(dst, '{')
	dst, _ = jsontext.AppendQuote(dst, branchName(branch))
	dst = append(dst, ':')
	dst = appendAvro(dst, r, branch, depth+1)
	return append(dst, '}')
}

// branchName is a union branch's key in plain JSON: a named type's full
// name, else the type's name (int, string, array, map...).
func branchName(s avro.Schema) string {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

// appendPrimitive reads one primitive value.
func appendPrimitive(dst []byte, r *avro.Reader, s *avro.PrimitiveSchema) []byte {
	switch s.Type() {
	case avro.Null:
		return append(dst, "null"...)
	case avro.Boolean:
		return strconv.AppendBool(dst, r.ReadBool())
	case avro.Int:
		return strconv.AppendInt(dst, int64(r.ReadInt()), 10)
	case avro.Long:
		return strconv.AppendInt(dst, r.ReadLong(), 10)
	case avro.Float:
		return appendFloat(dst, float64(r.ReadFloat()), 32)
	case avro.Double:
		return appendFloat(dst, r.ReadDouble(), 64)
	case avro.String:
		return appendString(dst, r, r.ReadString())
	case avro.Bytes:
		b := r.ReadBytes()
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return appendDecimal(dst, b, d.Scale())
		}
		return appendBase64(dst, b)
	}
	r.ReportError("decode", "unsupported primitive "+string(s.Type()))
	return dst
}

// appendString writes s as a JSON string; an Avro string that is not
// UTF-8 is an error rather than silently changed.
func appendString(dst []byte, r *avro.Reader, s string) []byte {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil && r.Error == nil {
		r.ReportError("decode", "a string is not valid UTF-8")
	}
	return out
}

// appendFloat writes a float in its shortest exact form; NaN and the
// infinities, which JSON lacks, as the strings "NaN", "Infinity" and
// "-Infinity".
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendBase64 writes b as a standard base64 JSON string.
func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// appendDecimal writes the two's-complement big-endian unscaled value b
// with scale digits after the point, as a JSON string ("12.34").
func appendDecimal(dst, b []byte, scale int) []byte {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	dst = append(dst, '"')
	if n.Sign() < 0 {
		dst = append(dst, '-')
		n.Neg(n)
	}
	digits := n.Text(10)
	if scale > 0 {
		if len(digits) <= scale {
			dst = append(dst, "0."...)
			for i := len(digits); i < scale; i++ {
				dst = append(dst, '0')
			}
			dst = append(dst, digits...)
		} else {
			dst = append(dst, digits[:len(digits)-scale]...)
			dst = append(dst, '.')
			dst = append(dst, digits[len(digits)-scale:]...)
		}
	} else {
		dst = append(dst, digits...)
	}
	return append(dst, '"')
}
