package schema_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/streamproc/processor/schema"
)

// roundTripSchemas cover nested records, unions, logical types, maps,
// arrays, enums, fixed and bytes.
var roundTripSchemas = []string{
	orderSchema,
	`{"type":"record","name":"Deep","namespace":"d","fields":[
	  {"name":"m","type":{"type":"map","values":{"type":"array","items":["null","long"]}}},
	  {"name":"u","type":["null","string","long",{"type":"enum","name":"Col","symbols":["R","G"]},{"type":"map","values":"int"}]},
	  {"name":"f","type":{"type":"fixed","name":"H","size":4}},
	  {"name":"b","type":"bytes"},
	  {"name":"fl","type":"float"},
	  {"name":"inner","type":{"type":"record","name":"In","fields":[
	    {"name":"when","type":{"type":"int","logicalType":"date"}},
	    {"name":"dec","type":{"type":"fixed","name":"Dec","size":6,"logicalType":"decimal","precision":12,"scale":4}},
	    {"name":"again","type":["null","In"]}]}}]}`,
	`{"type":"array","items":{"type":"map","values":{"type":"bytes","logicalType":"decimal","precision":30,"scale":9}}}`,
}

// TestAvroRoundTrip generates plain JSON values for several schemas and
// checks that encoding them gives binary that hamba/avro reads, and that
// decoding and encoding again gives the same bytes and the same JSON.
func TestAvroRoundTrip(t *testing.T) {
	for si, text := range roundTripSchemas {
		_, enc, dec := codecs(t, schema.Avro, text)
		sch := avro.MustParse(text)
		rng := rand.New(rand.NewPCG(uint64(si), 7))
		for i := 0; i < 300; i++ {
			js := genJSON(rng, sch, 0)
			b := mustEncode(t, enc, js)
			var v any
			if err := avro.Unmarshal(sch, b[5:], &v); err != nil {
				t.Fatalf("schema %d: hamba/avro cannot read the encoding of %s: %v", si, js, err)
			}
			got := mustDecode(t, dec, b)
			sameJSON(t, got, js)
			again := mustEncode(t, enc, got)
			if !bytes.Equal(again, b) {
				t.Fatalf("schema %d: decode then encode changed the bytes of %s:\n%x\n%x", si, js, b, again)
			}
		}
	}
}

// genJSON returns a random plain JSON value of schema s.
func genJSON(rng *rand.Rand, s avro.Schema, depth int) string {
	switch s := s.(type) {
	case *avro.RefSchema:
		return genJSON(rng, s.Schema(), depth)
	case *avro.RecordSchema:
		parts := make([]string, 0, len(s.Fields()))
		for _, f := range s.Fields() {
			parts = append(parts, strconv.Quote(f.Name())+":"+genJSON(rng, f.Type(), depth+1))
		}
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	case *avro.EnumSchema:
		return strconv.Quote(s.Symbols()[rng.IntN(len(s.Symbols()))])
	case *avro.ArraySchema:
		n := rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = genJSON(rng, s.Items(), depth+1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *avro.MapSchema:
		n := rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("%q:%s", fmt.Sprintf("k%d-%d", i, rng.IntN(100)), genJSON(rng, s.Values(), depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case *avro.UnionSchema:
		return genUnion(rng, s, depth)
	case *avro.FixedSchema:
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return genDecimal(rng, d)
		}
		b := make([]byte, s.Size())
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return strconv.Quote(base64.StdEncoding.EncodeToString(b))
	case *avro.PrimitiveSchema:
		return genPrimitive(rng, s)
	}
	panic("no generator for " + s.String())
}

// genUnion picks a branch; deep values take null where they can, so
// that recursive schemas end.
func genUnion(rng *rand.Rand, s *avro.UnionSchema, depth int) string {
	types := s.Types()
	i := rng.IntN(len(types))
	if depth > 4 {
		if n, _ := s.Indices(); s.Contains(avro.Null) {
			i = n
		}
	}
	t := types[i]
	if t.Type() == avro.Null {
		return "null"
	}
	if s.Nullable() {
		return genJSON(rng, t, depth+1)
	}
	name := string(t.Type())
	if n, ok := t.(avro.NamedSchema); ok {
		name = n.FullName()
	}
	return fmt.Sprintf("{%q:%s}", name, genJSON(rng, t, depth+1))
}

// genPrimitive returns a random primitive, at the edges of its range now
// and then.
func genPrimitive(rng *rand.Rand, s *avro.PrimitiveSchema) string {
	switch s.Type() {
	case avro.Null:
		return "null"
	case avro.Boolean:
		return strconv.FormatBool(rng.IntN(2) == 0)
	case avro.Int:
		return strconv.FormatInt(int64(int32(rng.Uint32())), 10)
	case avro.Long:
		edges := []int64{-1 << 63, 1<<63 - 1, 9007199254740993, 0}
		if rng.IntN(3) == 0 {
			return strconv.FormatInt(edges[rng.IntN(len(edges))], 10)
		}
		return strconv.FormatInt(int64(rng.Uint64()), 10)
	case avro.Float:
		return strconv.FormatFloat(float64(float32(rng.NormFloat64()*1e6)), 'g', -1, 32)
	case avro.Double:
		return strconv.FormatFloat(rng.NormFloat64()*1e12, 'g', -1, 64)
	case avro.String:
		return strconv.Quote([]string{"", "plain", "quote\" and \\ slash", "ünïcødé ☃", "tab\tnew\nline"}[rng.IntN(5)])
	case avro.Bytes:
		if d, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return genDecimal(rng, d)
		}
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return strconv.Quote(base64.StdEncoding.EncodeToString(b))
	}
	panic("no generator for " + s.String())
}

// genDecimal returns a random decimal string with exactly the schema's
// scale (as decoding writes it).
func genDecimal(rng *rand.Rand, d *avro.DecimalLogicalSchema) string {
	digits := make([]byte, 1+rng.IntN(d.Precision()))
	for i := range digits {
		digits[i] = byte('0' + rng.IntN(10))
	}
	s := strings.TrimLeft(string(digits), "0")
	for len(s) <= d.Scale() {
		s = "0" + s
	}
	if d.Scale() > 0 {
		s = s[:len(s)-d.Scale()] + "." + s[len(s)-d.Scale():]
	}
	if rng.IntN(2) == 0 && strings.Trim(s, "0.") != "" {
		s = "-" + s
	}
	return strconv.Quote(s)
}

// TestAvroDecodesLibraryBinary checks the decoder against binary that
// hamba/avro wrote from Go values, including blocks with sizes (as Java
// writers may write them).
func TestAvroDecodesLibraryBinary(t *testing.T) {
	text := `{"type":"record","name":"R","fields":[
	  {"name":"xs","type":{"type":"array","items":"int"}},
	  {"name":"m","type":{"type":"map","values":"string"}},
	  {"name":"n","type":["null","double"]},
	  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	_, _, dec := codecs(t, schema.Avro, text)
	cfg := avro.Config{BlockLength: 2}.Freeze() // two items a block, each with its size
	type rec struct {
		Xs []int             `avro:"xs"`
		M  map[string]string `avro:"m"`
		N  *float64          `avro:"n"`
		Ts int64             `avro:"ts"`
	}
	half := 0.5
	payload, err := cfg.Marshal(avro.MustParse(text), rec{Xs: []int{1, -2, 3, 400000}, M: map[string]string{"k": "v"}, N: &half, Ts: 1700000000123})
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte{0, 0, 0, 0, 1}, payload...)
	sameJSON(t, mustDecode(t, dec, b), `{"xs":[1,-2,3,400000],"m":{"k":"v"},"n":0.5,"ts":1700000000123}`)
}
