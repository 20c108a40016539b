package schema_test

import (
	"context"
	"testing"

	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/schematest"
)

const orderJSONSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "id": {"type": "string"},
    "amount_cents": {"type": "integer", "maximum": 9007199254740993},
    "total": {"$ref": "money.json"}
  },
  "required": ["id", "amount_cents"],
  "additionalProperties": false
}`

// TestJSONSchema checks that decoding validates and keeps the bytes as
// they are, with a registry reference.
func TestJSONSchema(t *testing.T) {
	reg := schematest.NewMemory()
	reg.MustRegister("money", schema.Schema{Type: schema.JSONSchema, Text: `{"type":"object","properties":{"units":{"type":"integer"}},"required":["units"]}`})
	sub := reg.MustRegister("orders-value", schema.Schema{Type: schema.JSONSchema, Text: orderJSONSchema,
		References: []schema.Reference{{Name: "money.json", Subject: "money", Version: 1}}})
	ctx := context.Background()
	enc, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dec := schema.NewDecoder(reg, schema.JSONSchema, schema.DecoderOptions{})
	js := `{ "id": "o-1",  "amount_cents": 9007199254740993, "total": {"units": 3} }`
	b := mustEncode(t, enc, js)
	if string(b[5:]) != js {
		t.Errorf("payload %q, want the JSON unchanged", b[5:])
	}
	if got := mustDecode(t, dec, b); got != js {
		t.Errorf("decoded %q, want the bytes unchanged", got)
	}

	// 9007199254740994 exceeds the maximum only when compared exactly.
	_, err = enc.Encode(nil, []byte(`{"id":"o","amount_cents":9007199254740994}`))
	wantFault(t, err, schema.FaultRecord, "/amount_cents")
	_, err = enc.Encode(nil, []byte(`{"id":"o","amount_cents":1,"total":{"units":"3"}}`))
	wantFault(t, err, schema.FaultRecord, "/total/units")
	_, err = enc.Encode(nil, []byte(`{"id":"o"}`))
	wantFault(t, err, schema.FaultRecord, "amount_cents")
	_, err = enc.Encode(nil, []byte(`{"id":`))
	wantFault(t, err, schema.FaultRecord, "not valid JSON")
	_, err = enc.Encode(nil, []byte(`{"id":"o","amount_cents":1} {}`))
	wantFault(t, err, schema.FaultRecord, "not valid JSON")

	bad := append(append([]byte{}, b[:5]...), `{"id":1,"amount_cents":1}`...)
	_, err = dec.Decode(ctx, bad, nil)
	wantFault(t, err, schema.FaultRecord, "/id")
}

// TestJSONSchemaCompileFaults checks schemas that do not compile, and
// that a schema cannot reach files or the network.
func TestJSONSchemaCompileFaults(t *testing.T) {
	reg := schematest.NewMemory()
	ctx := context.Background()
	for name, text := range map[string]string{
		"not JSON":    `{"type":`,
		"bad keyword": `{"type":"objekt"}`,
		"file ref":    `{"$ref":"file:///etc/passwd"}`,
		"http ref":    `{"$ref":"http://127.0.0.1:1/x.json"}`,
	} {
		sub := reg.MustRegister(name, schema.Schema{Type: schema.JSONSchema, Text: text})
		_, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{})
		wantFault(t, err, schema.FaultSchema, "does not compile")
	}
}
