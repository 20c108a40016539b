package schema

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/twmb/avro"
)

// TestAvroHambaDifferential decodes hamba/avro's encoding (the codec's
// library before twmb/avro) of the generator's values: the codec must
// give the same plain JSON as from twmb/avro's bytes.
func TestAvroHambaDifferential(t *testing.T) {
	var checked, skipped int
	for seed := uint64(0); seed < 3000; seed++ {
		g := &diffGen{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
		text, mk := g.schema(0, "")
		hs, err := hamba.Parse(text)
		if err != nil {
			skipped++
			continue
		}
		if _, err := avro.Parse(text); err != nil {
			t.Fatal(err)
		}
		c, err := compileAvro(Schema{Type: Avro, Text: text}, nil)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for i := 0; i < 10; i++ {
			o := mk(g, 0, false)
			b, err := func() (b []byte, err error) {
				defer func() {
					if recover() != nil {
						err = errHambaPanic
					}
				}()
				return hamba.Marshal(hs, toHamba(hs, o.v))
			}()
			if err != nil {
				skipped++
				if skipped < 0 {
					t.Logf("hamba cannot encode under %s: %v", text, err)
				}
				continue
			}
			out, err := c.(*avroCodec).decode(b, nil, nil)
			if err != nil || string(out) != o.plain {
				t.Fatalf("seed %d: under %s hamba's %x decodes to %s, %v; want %s", seed, text, b, out, err, o.plain)
			}
			checked++
		}
	}
	t.Logf("%d values checked, %d skipped", checked, skipped)
}

// errHambaPanic is a value hamba/avro panics on.
var errHambaPanic = errors.New("hamba/avro panics")

// toHamba converts a generator value to the Go value hamba takes.
func toHamba(s hamba.Schema, v any) any {
	switch s := s.(type) {
	case *hamba.RefSchema:
		return toHamba(s.Schema(), v)
	case *hamba.RecordSchema:
		m := v.(map[string]any)
		out := map[string]any{}
		for _, f := range s.Fields() {
			out[f.Name()] = toHamba(f.Type(), m[f.Name()])
		}
		return out
	case *hamba.ArraySchema:
		arr := v.([]any)
		out := make([]any, len(arr))
		for i := range arr {
			out[i] = toHamba(s.Items(), arr[i])
		}
		return out
	case *hamba.MapSchema:
		m := v.(map[string]any)
		out := map[string]any{}
		for k, x := range m {
			out[k] = toHamba(s.Values(), x)
		}
		return out
	case *hamba.UnionSchema:
		if v == nil {
			return nil
		}
		if s.Nullable() {
			_, typ := s.Indices()
			t := s.Types()[typ]
			return map[string]any{branchHamba(t): toHamba(t, v)}
		}
		m := v.(map[string]any)
		for k, x := range m {
			for _, t := range s.Types() {
				if branchHamba(t) == k {
					return map[string]any{k: toHamba(t, x)}
				}
			}
		}
		return v
	case *hamba.FixedSchema:
		b, ok := v.([]byte)
		if !ok {
			return v // a decimal's *big.Rat
		}
		arr := reflect.New(reflect.ArrayOf(len(b), reflect.TypeOf(byte(0)))).Elem()
		reflect.Copy(arr, reflect.ValueOf(b))
		return arr.Interface()
	case *hamba.PrimitiveSchema:
		lt := ""
		if s.Logical() != nil {
			lt = string(s.Logical().Type())
		}
		switch x := v.(type) {
		case int32:
			switch lt {
			case "date":
				return time.Unix(int64(x)*86400, 0).UTC()
			case "time-millis":
				return time.Duration(x) * time.Millisecond
			}
			return int(x)
		case int64:
			switch lt {
			case "time-micros":
				if x > math.MaxInt64/1000 || x < math.MinInt64/1000 {
					return struct{}{} // hamba takes a time.Duration: skipped
				}
				return time.Duration(x) * time.Microsecond
			case "timestamp-millis", "local-timestamp-millis":
				return time.UnixMilli(x).UTC()
			case "timestamp-micros", "local-timestamp-micros":
				return time.UnixMicro(x).UTC()
			}
		}
	}
	return v
}

// branchHamba is a union branch's key under hamba.
func branchHamba(s hamba.Schema) string {
	if ref, ok := s.(*hamba.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := s.(hamba.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}
