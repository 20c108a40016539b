package schema_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/schematest"
)

// TestWireHeaderFaults checks the record faults of the header.
func TestWireHeaderFaults(t *testing.T) {
	_, _, dec := codecs(t, schema.Avro, `"string"`)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		b    []byte
		says string
	}{
		{"empty", nil, "no magic byte"},
		{"no magic byte", []byte(`{"a":1}`), "no magic byte (the value is not in the Schema Registry wire format)"},
		{"short record", []byte{0, 0, 1}, "short record"},
		{"unknown id", []byte{0, 0, 0, 0, 42, 2, 'x'}, "the registry does not have the schema id the record names: memory registry: schema id 42 not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := dec.Decode(ctx, c.b, []byte("dst"))
			wantFault(t, err, schema.FaultRecord, c.says)
			if string(out) != "dst" {
				t.Errorf("dst after a failure is %q", out)
			}
		})
	}
}

// TestDecodeRaw checks that Raw passes bytes through with no registry.
func TestDecodeRaw(t *testing.T) {
	reg := schematest.NewMemory()
	reg.Fail(schema.FaultRegistry)
	out, err := schema.NewDecoder(reg, schema.Raw, schema.DecoderOptions{}).Decode(context.Background(), []byte("\x00abc"), []byte("<"))
	if err != nil || string(out) != "<\x00abc" {
		t.Errorf("Raw: %q, %v", out, err)
	}
	_, err = schema.NewEncoder(context.Background(), reg, schema.Subject{Subject: "s", Schema: schema.Schema{Type: schema.Raw}}, schema.EncoderOptions{})
	wantFault(t, err, schema.FaultSchema, "not a codec format")
}

// TestDecodeRegistryFaults checks that a registry failure while fetching
// a schema keeps its fault, and that the failure is not cached.
func TestDecodeRegistryFaults(t *testing.T) {
	reg, enc, dec := codecs(t, schema.Avro, `"string"`)
	b := mustEncode(t, enc, `"x"`)
	for _, f := range []schema.Fault{schema.FaultRegistry, schema.FaultCredentials} {
		reg.Fail(f)
		_, err := dec.Decode(context.Background(), b, nil)
		wantFault(t, err, f, "fetching schema id 1")
	}
	reg.Fail("")
	if got := mustDecode(t, dec, b); got != `"x"` {
		t.Errorf("after the registry came back: %s", got)
	}
}

// TestDecodeWrongFormat checks that an id whose schema is of another
// type is the record's fault.
func TestDecodeWrongFormat(t *testing.T) {
	reg, enc, _ := codecs(t, schema.Avro, `"string"`)
	b := mustEncode(t, enc, `"x"`)
	dec := schema.NewDecoder(reg, schema.JSONSchema, schema.DecoderOptions{})
	_, err := dec.Decode(context.Background(), b, nil)
	wantFault(t, err, schema.FaultRecord, "schema id 1 is a avro schema, not json_schema")
}

// TestDecodeUncompilableSchema checks that a registered schema that does
// not compile is the fault of the records that name it.
func TestDecodeUncompilableSchema(t *testing.T) {
	reg := schematest.NewMemory()
	sub := reg.MustRegister("bad", schema.Schema{Type: schema.Avro, Text: `{"type":"nope"}`})
	dec := schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{})
	_, err := dec.Decode(context.Background(), []byte{0, 0, 0, 0, byte(sub.ID), 0}, nil)
	wantFault(t, err, schema.FaultRecord, "schema id 1", "does not compile")
}

// slowRegistry delays SchemaByID so that concurrent lookups overlap.
type slowRegistry struct {
	*schematest.Memory
}

// SchemaByID waits a little before answering.
func (s slowRegistry) SchemaByID(ctx context.Context, id int) (schema.Schema, error) {
	time.Sleep(20 * time.Millisecond)
	return s.Memory.SchemaByID(ctx, id)
}

// TestDecodeConcurrentOneCall checks that many goroutines decoding a
// record of one unknown id make one registry call.
func TestDecodeConcurrentOneCall(t *testing.T) {
	mem, enc, _ := codecs(t, schema.Avro, orderSchema)
	b := mustEncode(t, enc, orderJSON)
	dec := schema.NewDecoder(slowRegistry{mem}, schema.Avro, schema.DecoderOptions{})
	before := mem.Calls("SchemaByID")
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := dec.Decode(context.Background(), b, nil)
			if err == nil && len(out) == 0 {
				err = errors.New("empty output")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := mem.Calls("SchemaByID") - before; n != 1 {
		t.Errorf("%d registry calls for one id, want 1", n)
	}
}

// TestDecoderCacheBound checks that the cache keeps at most MaxSchemas
// schemas, evicting the least recently used.
func TestDecoderCacheBound(t *testing.T) {
	reg := schematest.NewMemory()
	var recs [][]byte
	for _, text := range []string{`"string"`, `"long"`, `"int"`} {
		sub := reg.MustRegister("s-"+text, schema.Schema{Type: schema.Avro, Text: text})
		enc, err := schema.NewEncoder(context.Background(), reg, sub, schema.EncoderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		val := `"x"`
		if text != `"string"` {
			val = "5"
		}
		recs = append(recs, mustEncode(t, enc, val))
	}
	dec := schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{MaxSchemas: 2})
	calls := func() int { return reg.Calls("SchemaByID") }
	mustDecode(t, dec, recs[0])
	mustDecode(t, dec, recs[1])
	mustDecode(t, dec, recs[0]) // 0 is now the most recent
	n := calls()
	mustDecode(t, dec, recs[2]) // evicts 1
	mustDecode(t, dec, recs[0])
	if calls() != n+1 {
		t.Errorf("id 1 was evicted though it was used last")
	}
	mustDecode(t, dec, recs[1])
	if calls() != n+2 {
		t.Errorf("id 2 was still cached in a cache of 2 holding 1 and 3")
	}
}

// hangingRegistry answers nothing: every call waits for its context.
type hangingRegistry struct{ schema.Registry }

func (hangingRegistry) SchemaByID(ctx context.Context, _ int) (schema.Schema, error) {
	<-ctx.Done()
	return schema.Schema{}, &schema.Error{Fault: schema.FaultRegistry, Err: ctx.Err()}
}

// TestDecoderTimeout checks that DecoderOptions.Timeout ends the lookup
// of an uncached schema id at a registry that hangs with FaultRegistry,
// though the caller's context has no deadline.
func TestDecoderTimeout(t *testing.T) {
	dec := schema.NewDecoder(hangingRegistry{}, schema.Avro, schema.DecoderOptions{Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := dec.Decode(context.Background(), []byte{0, 0, 0, 0, 7, 2, 'x'}, nil)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Decode took %s with a 50ms timeout", took)
	}
	wantFault(t, err, schema.FaultRegistry)
}
