package schema

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/avro"
)

// TestAvroDifferential holds the codec to twmb/avro on random schemas
// and values: the codec's encoding of the plain JSON is twmb/avro's
// encoding of the same value, byte for byte, and the codec decodes
// twmb/avro's bytes to that plain JSON, byte for byte.
func TestAvroDifferential(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	for seed := 0; seed < n; seed++ {
		avroDifferential(t, uint64(seed))
	}
}

// FuzzAvroDifferential is TestAvroDifferential from fuzzed seeds.
func FuzzAvroDifferential(f *testing.F) {
	for seed := range uint64(16) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { avroDifferential(t, seed) })
}

// avroDifferential checks one random schema with ten values.
func avroDifferential(t *testing.T, seed uint64) {
	t.Helper()
	g := &diffGen{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	text, mk := g.schema(0, "")
	sch, err := avro.Parse(text)
	if err != nil {
		t.Fatalf("seed %d: twmb/avro refuses the generated schema %s: %v", seed, text, err)
	}
	c, err := compileAvro(Schema{Type: Avro, Text: text}, nil)
	if err != nil {
		t.Fatalf("seed %d: schema %s: %v", seed, text, err)
	}
	codec := c.(*avroCodec)
	checkDefaults(t, seed, text, sch, codec)
	for i := 0; i < 10; i++ {
		o := mk(g, 0, false)
		v, js := o.v, o.plain
		want, err := sch.AppendEncode(nil, v)
		if err != nil {
			t.Fatalf("seed %d: twmb/avro cannot encode %#v (%s) under %s: %v", seed, v, js, text, err)
		}
		got, err := codec.encode(nil, []byte(o.in()))
		if err != nil {
			t.Fatalf("seed %d: encode %s under %s: %v", seed, js, text, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: encode %s under %s:\n got %x\nwant %x (twmb/avro)", seed, o.in(), text, got, want)
		}
		out, err := codec.decode(want, nil, nil)
		if err != nil {
			t.Fatalf("seed %d: decode %x under %s: %v", seed, want, text, err)
		}
		if string(out) != js {
			t.Fatalf("seed %d: decode under %s:\n got %s\nwant %s", seed, text, out, js)
		}
	}
}

// checkDefaults holds every field default the codec encoded to
// twmb/avro's encoding of the default as twmb/avro read it.
func checkDefaults(t *testing.T, seed uint64, text string, sch *avro.Schema, c *avroCodec) {
	t.Helper()
	ours := map[string]*avroField{}
	var walk func(n *avroNode, seen map[*avroNode]bool)
	walk = func(n *avroNode, seen map[*avroNode]bool) {
		if seen[n] {
			return
		}
		seen[n] = true
		for i := range n.fields {
			ours[n.typ+"."+n.fields[i].name] = &n.fields[i]
			walk(n.fields[i].typ, seen)
		}
		for _, b := range n.branches {
			walk(b, seen)
		}
		if n.items != nil {
			walk(n.items, seen)
		}
	}
	walk(c.root, map[*avroNode]bool{})
	var check func(n *avro.SchemaNode)
	check = func(n *avro.SchemaNode) {
		for i := range n.Fields {
			f := &n.Fields[i]
			check(&f.Type)
			if !f.HasDefault || ambiguousUnion(f.Type.ExpandReferences(), 0) {
				continue
			}
			fs, err := f.Type.Schema()
			if err != nil {
				t.Fatalf("seed %d: field %s of %s: %v", seed, f.Name, text, err)
			}
			want, err := fs.AppendEncode(nil, f.Default)
			if err != nil {
				t.Fatalf("seed %d: twmb/avro cannot encode the default %#v of field %s of %s: %v", seed, f.Default, f.Name, text, err)
			}
			ours := ours[fullName(n)+"."+f.Name]
			if ours == nil || !bytes.Equal(ours.def, want) {
				t.Fatalf("seed %d: default of field %s of %s:\n got %v\nwant %x (twmb/avro)", seed, f.Name, text, ours, want)
			}
		}
		for i := range n.Branches {
			check(&n.Branches[i])
		}
		if n.Items != nil {
			check(n.Items)
		}
		if n.Values != nil {
			check(n.Values)
		}
	}
	check(sch.Root())
}

// ambiguousUnion reports whether n holds a union with two branches that
// take the same Go type (bytes and fixed; string and enum; record and
// map), where twmb/avro's Encode of a bare value may take another branch
// than its reading of a default took.
func ambiguousUnion(n *avro.SchemaNode, depth int) bool {
	if n == nil || depth > 20 {
		return false
	}
	class := map[string]string{"fixed": "bytes", "enum": "string", "record": "map", "error": "map"}
	seen := map[string]bool{}
	for i := range n.Branches {
		c := n.Branches[i].Type
		if k, ok := class[c]; ok {
			c = k
		}
		if seen[c] || ambiguousUnion(&n.Branches[i], depth+1) {
			return true
		}
		seen[c] = true
	}
	for i := range n.Fields {
		if ambiguousUnion(&n.Fields[i].Type, depth+1) {
			return true
		}
	}
	return ambiguousUnion(n.Items, depth+1) || ambiguousUnion(n.Values, depth+1)
}

// FuzzAvroDecode decodes arbitrary payloads under random schemas: the
// codec must not panic, and what it decodes twmb/avro must read too, to
// its last byte, and the codec must encode the JSON back to bytes that
// decode to the same JSON, except where the binary holds what plain JSON
// cannot give back (docs/schemas.md, "Limits"): a decimal with more
// digits than its precision, a map with a key twice.
func FuzzAvroDecode(f *testing.F) {
	f.Add(uint64(1), []byte{0})
	f.Add(uint64(7), []byte{2, 4, 0, 1, 0x80})
	f.Add(uint64(42), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	// A time-micros long past time.Duration's range (found by the fuzzer).
	f.Add(uint64(21), []byte{0x90, 0xfc, 0xd2, 0x8f, 0xaf, 0xfc, 0x84, 0x30})
	// 4,168 nulls in 3 bytes: more items that take no bytes than allowed.
	f.Add(uint64(138), []byte{0x94, 0x41, 0x00})
	// A union index in six bytes: an int takes at most five.
	f.Add(uint64(159), []byte{0x30, 0x30, 0x30, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x30})
	f.Fuzz(func(t *testing.T, seed uint64, payload []byte) {
		g := &diffGen{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
		text, _ := g.schema(0, "")
		sch, err := avro.Parse(text)
		if err != nil {
			t.Fatalf("seed %d: %s: %v", seed, text, err)
		}
		c, err := compileAvro(Schema{Type: Avro, Text: text}, nil)
		if err != nil {
			t.Fatalf("seed %d: %s: %v", seed, text, err)
		}
		codec := c.(*avroCodec)
		js, err := codec.decode(payload, nil, nil)
		if err != nil {
			return
		}
		var v any
		rest, err := sch.Decode(payload, &v)
		if err != nil && strings.Contains(err.Error(), "overflows time.Duration") {
			// twmb/avro reads time-micros into a time.Duration, which holds
			// ±292 years; the codec gives the long as it is. The bytes must
			// still read, to their last byte, as the underlying types.
			rest, err = bareSchema(t, text).Decode(payload, &v)
		}
		if err != nil || len(rest) != 0 {
			t.Fatalf("seed %d: %s: the codec decodes %x to %s, twmb/avro: %v, %d bytes left", seed, text, payload, js, err, len(rest))
		}
		again, err := codec.encode(nil, js)
		if err != nil && (strings.Contains(err.Error(), "digits of decimal") || strings.Contains(err.Error(), "duplicate")) {
			return
		}
		if err != nil {
			t.Fatalf("seed %d: %s: %s does not encode: %v", seed, text, js, err)
		}
		back, err := codec.decode(again, nil, nil)
		if err != nil || !bytes.Equal(back, js) {
			t.Fatalf("seed %d: %s: %s encodes to %x, which decodes to %s, %v", seed, text, js, again, back, err)
		}
	})
}

// bareSchema parses text with every logicalType removed: the schema of the
// underlying types, which twmb/avro reads without converting a value.
func bareSchema(t *testing.T, text string) *avro.Schema {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	var strip func(any)
	strip = func(n any) {
		switch n := n.(type) {
		case map[string]any:
			delete(n, "logicalType")
			for _, c := range n {
				strip(c)
			}
		case []any:
			for _, c := range n {
				strip(c)
			}
		}
	}
	strip(doc)
	bare, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := avro.Parse(string(bare))
	if err != nil {
		t.Fatalf("%s: %v", bare, err)
	}
	return sch
}
