package schema

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// avroCodec maps Avro binary to plain JSON and back, walking the schema
// that twmb/avro parsed and validated (as a tree of avroNodes). Plain
// JSON (docs/schemas.md) is not Avro's JSON encoding, so the walk is
// ours, and so are the binary primitives under it (avro_binary.go),
// held to twmb/avro's Encode and Decode by TestAvroDifferential.
type avroCodec struct {
	root   *avroNode
	parser jsonParser
}

// compileAvro parses s with its referenced named types (parsed first,
// into a cache of this schema's own).
func compileAvro(s Schema, refs []namedSchema) (codec, error) {
	texts := make([]string, len(refs))
	for i, r := range refs {
		if r.schema.Type != Avro {
			return nil, fmt.Errorf("reference %q is a %s schema, not avro", r.name, r.schema.Type)
		}
		texts[i] = r.schema.Text
	}
	_, root, tree, err := compileAvroTree(s.Text, texts)
	if err != nil {
		var re *avroRefError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("reference %q: %w", refs[re.index].name, re.err)
		}
		return nil, err
	}
	c := &avroCodec{root: root}
	c.parser.names = make(map[string]string)
	if err := c.encodeDefaults(tree); err != nil {
		return nil, err
	}
	return c, nil
}

// index is nil: Avro headers carry no message indexes.
func (c *avroCodec) index() []int { return nil }

// decode appends the plain JSON form of payload to dst.
func (c *avroCodec) decode(payload []byte, _ []int, dst []byte) ([]byte, error) {
	r := avroReader{buf: payload}
	start := len(dst)
	out := appendAvro(dst, &r, c.root, 0)
	if r.err != nil {
		return dst[:start], r.err
	}
	if r.pos < len(payload) {
		return dst[:start], fmt.Errorf("bytes are left after the value: the payload is longer than the schema's value")
	}
	return out, nil
}

// maxAvroDepth bounds how deep values nest (recursive schemas).
const maxAvroDepth = 1000

// appendAvro reads one value of schema s from r and appends its JSON.
// Errors are left in r.err.
func appendAvro(dst []byte, r *avroReader, s *avroNode, depth int) []byte {
	if depth > maxAvroDepth {
		r.fail("values nest too deeply")
		return dst
	}
	switch s.kind {
	case avroNull:
		return append(dst, "null"...)
	case avroBoolean:
		return strconv.AppendBool(dst, r.readBool())
	case avroInt:
		return strconv.AppendInt(dst, int64(r.readInt()), 10)
	case avroLong:
		return strconv.AppendInt(dst, r.readLong(), 10)
	case avroFloat:
		return appendFloat(dst, float64(r.readFloat()), 32)
	case avroDouble:
		return appendFloat(dst, r.readDouble(), 64)
	case avroString:
		return appendString(dst, r, r.readString())
	case avroBytes:
		b := r.readBytes("bytes")
		if s.decimal {
			return appendDecimal(dst, b, s.scale)
		}
		return appendBase64(dst, b)
	case avroRecord:
		dst = append(dst, '{')
		for i := range s.fields {
			f := &s.fields[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst, _ = jsontext.AppendQuote(dst, f.name)
			dst = append(dst, ':')
			dst = appendAvro(dst, r, f.typ, depth+1)
			if r.err != nil {
				return dst
			}
		}
		return append(dst, '}')
	case avroEnum:
		i := r.readInt()
		if r.err != nil {
			return dst
		}
		if i < 0 || int(i) >= len(s.symbols) {
			r.fail("enum " + s.typ + ": symbol index " + strconv.Itoa(int(i)) + " out of range")
			return dst
		}
		dst, _ = jsontext.AppendQuote(dst, s.symbols[i])
		return dst
	case avroArray:
		return appendBlocks(dst, r, '[', ']', func(dst []byte) []byte { return appendAvro(dst, r, s.items, depth+1) })
	case avroMap:
		return appendBlocks(dst, r, '{', '}', func(dst []byte) []byte {
			dst = appendString(dst, r, r.readString())
			dst = append(dst, ':')
			return appendAvro(dst, r, s.items, depth+1)
		})
	case avroUnion:
		return appendUnion(dst, r, s, depth)
	case avroFixed:
		b := r.readFixed(s.size)
		if s.decimal {
			return appendDecimal(dst, b, s.scale)
		}
		return appendBase64(dst, b)
	}
	r.fail("unsupported schema type " + s.typ)
	return dst
}

// maxBlockItems bounds the items of one array or map block, so that a
// corrupt count of items that take no bytes (nulls) cannot spin.
const maxBlockItems = 1 << 20

// maxEmptyItems bounds the items of one payload that take no bytes (an
// array of nulls or of records without fields): without it a few bytes
// of blocks would decode to gigabytes of JSON, and one record would take
// the process's memory. It is the bound twmb/avro keeps too, so what
// this codec reads the reference reads.
const maxEmptyItems = 4 << 10

// appendBlocks reads the blocks of an array or map, each item with item.
func appendBlocks(dst []byte, r *avroReader, open, close byte, item func([]byte) []byte) []byte {
	dst = append(dst, open)
	first := true
	for {
		n := r.readBlockHeader()
		if n == 0 || r.err != nil {
			break
		}
		if n < 0 || n > maxBlockItems {
			r.fail("a block claims " + strconv.FormatInt(n, 10) + " items, more than the " + strconv.Itoa(maxBlockItems) + " allowed")
			return dst
		}
		for ; n > 0; n-- {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			at := r.pos
			dst = item(dst)
			if r.err != nil {
				return dst
			}
			if r.pos == at {
				if r.empty++; r.empty > maxEmptyItems {
					r.fail("more than " + strconv.Itoa(maxEmptyItems) + " items that take no bytes (an array of nulls or of empty records)")
					return dst
				}
			}
		}
	}
	return append(dst, close)
}

// appendUnion reads a union: null as null, the other branch of a
// nullable union as its value, any other branch as {"<name>": value}.
func appendUnion(dst []byte, r *avroReader, s *avroNode, depth int) []byte {
	i := int64(r.readInt()) // an int, as the specification has it (at most 5 bytes)
	if r.err != nil {
		return dst
	}
	if i < 0 || i >= int64(len(s.branches)) {
		r.fail("union branch " + strconv.FormatInt(i, 10) + " out of range")
		return dst
	}
	branch := s.branches[i]
	if branch.kind == avroNull {
		return append(dst, "null"...)
	}
	if s.nullable {
		return appendAvro(dst, r, branch, depth+1)
	}
	dst = append(dst, '{')
	dst, _ = jsontext.AppendQuote(dst, branch.typ)
	dst = append(dst, ':')
	dst = appendAvro(dst, r, branch, depth+1)
	return append(dst, '}')
}

// appendString writes s as a JSON string; an Avro string that is not
// UTF-8 is an error rather than silently changed.
func appendString(dst []byte, r *avroReader, s string) []byte {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		r.fail("a string is not valid UTF-8")
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
