package schema_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/schema"
	"github.com/twmb/avro"
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
// checks that encoding them gives binary that twmb/avro reads, and that
// decoding and encoding again gives the same bytes and the same JSON.
func TestAvroRoundTrip(t *testing.T) {
	for si, text := range roundTripSchemas {
		_, enc, dec := codecs(t, schema.Avro, text)
		sch := avro.MustParse(text)
		g := &genAvro{named: map[string]*avro.SchemaNode{}}
		root := sch.Root()
		rng := rand.New(rand.NewPCG(uint64(si), 7))
		for i := 0; i < 300; i++ {
			js := g.json(rng, root, "", 0)
			b := mustEncode(t, enc, js)
			var v any
			if _, err := sch.Decode(b[5:], &v); err != nil {
				t.Fatalf("schema %d: twmb/avro cannot read the encoding of %s: %v", si, js, err)
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

// genAvro generates plain JSON values over twmb/avro's schema tree,
// resolving references to named types it has met.
type genAvro struct {
	named map[string]*avro.SchemaNode
}

// avroFullName is a named node's full name.
func avroFullName(n *avro.SchemaNode) string {
	if strings.Contains(n.Name, ".") || n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "." + n.Name
}

// resolve returns the node a reference names (itself when it is none).
func (g *genAvro) resolve(n *avro.SchemaNode, ns string) (*avro.SchemaNode, string) {
	switch n.Type {
	case "null", "boolean", "int", "long", "float", "double", "string", "bytes", "array", "map", "union":
		return n, ns
	case "record", "error", "enum", "fixed":
		name := avroFullName(n)
		g.named[name] = n
		return n, name[:max(strings.LastIndexByte(name, '.'), 0)]
	}
	if d, ok := g.named[ns+"."+n.Type]; ok {
		return d, ns
	}
	return g.named[n.Type], ns
}

// json returns a random plain JSON value of schema s.
func (g *genAvro) json(rng *rand.Rand, s *avro.SchemaNode, ns string, depth int) string {
	s, ns = g.resolve(s, ns)
	switch s.Type {
	case "record", "error":
		parts := make([]string, 0, len(s.Fields))
		for i := range s.Fields {
			f := &s.Fields[i]
			parts = append(parts, strconv.Quote(f.Name)+":"+g.json(rng, &f.Type, ns, depth+1))
		}
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	case "enum":
		return strconv.Quote(s.Symbols[rng.IntN(len(s.Symbols))])
	case "array":
		n := rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = g.json(rng, s.Items, ns, depth+1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case "map":
		n := rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("%q:%s", fmt.Sprintf("k%d-%d", i, rng.IntN(100)), g.json(rng, s.Values, ns, depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case "union":
		return g.union(rng, s, ns, depth)
	case "fixed":
		if s.LogicalType == "decimal" {
			return genDecimal(rng, s.Precision, s.Scale)
		}
		b := make([]byte, s.Size)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return strconv.Quote(base64.StdEncoding.EncodeToString(b))
	}
	return genPrimitive(rng, s)
}

// union picks a branch; deep values take null where they can, so that
// recursive schemas end.
func (g *genAvro) union(rng *rand.Rand, s *avro.SchemaNode, ns string, depth int) string {
	null := -1
	for i := range s.Branches {
		if s.Branches[i].Type == "null" {
			null = i
		}
	}
	i := rng.IntN(len(s.Branches))
	if depth > 4 && null >= 0 {
		i = null
	}
	t, tns := g.resolve(&s.Branches[i], ns)
	if t.Type == "null" {
		return "null"
	}
	if len(s.Branches) == 2 && null >= 0 {
		return g.json(rng, t, tns, depth+1)
	}
	name := t.Type
	switch t.Type {
	case "record", "error", "enum", "fixed":
		name = avroFullName(t)
	}
	return fmt.Sprintf("{%q:%s}", name, g.json(rng, t, tns, depth+1))
}

// genPrimitive returns a random primitive, at the edges of its range now
// and then.
func genPrimitive(rng *rand.Rand, s *avro.SchemaNode) string {
	switch s.Type {
	case "null":
		return "null"
	case "boolean":
		return strconv.FormatBool(rng.IntN(2) == 0)
	case "int":
		return strconv.FormatInt(int64(int32(rng.Uint32())), 10)
	case "long":
		edges := []int64{-1 << 63, 1<<63 - 1, 9007199254740993, 0}
		if rng.IntN(3) == 0 {
			return strconv.FormatInt(edges[rng.IntN(len(edges))], 10)
		}
		return strconv.FormatInt(int64(rng.Uint64()), 10)
	case "float":
		return strconv.FormatFloat(float64(float32(rng.NormFloat64()*1e6)), 'g', -1, 32)
	case "double":
		return strconv.FormatFloat(rng.NormFloat64()*1e12, 'g', -1, 64)
	case "string":
		return strconv.Quote([]string{"", "plain", "quote\" and \\ slash", "ünïcødé ☃", "tab\tnew\nline"}[rng.IntN(5)])
	case "bytes":
		if s.LogicalType == "decimal" {
			return genDecimal(rng, s.Precision, s.Scale)
		}
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return strconv.Quote(base64.StdEncoding.EncodeToString(b))
	}
	panic("no generator for " + s.Type)
}

// genDecimal returns a random decimal string with exactly the schema's
// scale (as decoding writes it).
func genDecimal(rng *rand.Rand, precision, scale int) string {
	digits := make([]byte, 1+rng.IntN(precision))
	for i := range digits {
		digits[i] = byte('0' + rng.IntN(10))
	}
	s := strings.TrimLeft(string(digits), "0")
	for len(s) <= scale {
		s = "0" + s
	}
	if scale > 0 {
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if rng.IntN(2) == 0 && strings.Trim(s, "0.") != "" {
		s = "-" + s
	}
	return strconv.Quote(s)
}

// TestAvroDecodesLibraryBinary checks the decoder against binary with
// blocks that carry their sizes (a negative count, then the size in
// bytes), as Java writers may write them: the items are encoded by
// twmb/avro, the blocks are put together here, and twmb/avro must read
// the whole back to the values it was made of.
func TestAvroDecodesLibraryBinary(t *testing.T) {
	text := `{"type":"record","name":"R","fields":[
	  {"name":"xs","type":{"type":"array","items":"int"}},
	  {"name":"m","type":{"type":"map","values":"string"}},
	  {"name":"n","type":["null","double"]},
	  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	_, _, dec := codecs(t, schema.Avro, text)
	enc := func(typ string, v any) []byte {
		b, err := avro.MustParse(typ).Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// block is one block of items with its size: -count, size, items.
	block := func(items ...[]byte) []byte {
		body := bytes.Join(items, nil)
		b := enc(`"long"`, int64(-len(items)))
		b = append(b, enc(`"long"`, int64(len(body)))...)
		return append(b, body...)
	}
	var payload []byte
	payload = append(payload, block(enc(`"int"`, int32(1)), enc(`"int"`, int32(-2)))...) // two items a block
	payload = append(payload, block(enc(`"int"`, int32(3)), enc(`"int"`, int32(400000)))...)
	payload = append(payload, 0)
	payload = append(payload, block(append(enc(`"string"`, "k"), enc(`"string"`, "v")...))...)
	payload = append(payload, 0)
	payload = append(payload, enc(`["null","double"]`, 0.5)...)
	payload = append(payload, enc(`"long"`, int64(1700000000123))...)

	type rec struct {
		Xs []int             `avro:"xs"`
		M  map[string]string `avro:"m"`
		N  *float64          `avro:"n"`
		Ts int64             `avro:"ts"`
	}
	var back rec
	if rest, err := avro.MustParse(text).Decode(payload, &back); err != nil || len(rest) != 0 {
		t.Fatalf("twmb/avro reads the blocks as %+v, %d bytes left, %v", back, len(rest), err)
	}
	if fmt.Sprint(back.Xs, back.M, *back.N, back.Ts) != "[1 -2 3 400000] map[k:v] 0.5 1700000000123" {
		t.Fatalf("twmb/avro reads the blocks as %+v", back)
	}

	b := append([]byte{0, 0, 0, 0, 1}, payload...)
	sameJSON(t, mustDecode(t, dec, b), `{"xs":[1,-2,3,400000],"m":{"k":"v"},"n":0.5,"ts":1700000000123}`)
}
