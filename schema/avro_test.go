package schema_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/streamproc/processor/schema"
	"github.com/twmb/avro"
)

const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "amount_cents", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "rate", "type": "double"},
    {"name": "paid", "type": "boolean"},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
      {"name": "sku", "type": "string"}, {"name": "count", "type": "int", "default": 1}]}}}
  ]}`

const orderJSON = `{"id":"o-1","amount_cents":9007199254740993,"qty":3,"rate":0.25,"paid":true,"note":"ring twice",
  "status":"PAID","created":1700000000123,"price":"12.34","items":[{"sku":"a","count":2},{"sku":"b","count":1}]}`

// TestAvroOrder checks the plain JSON mapping of a record with mixed
// types both ways, and that the binary is what twmb/avro reads.
func TestAvroOrder(t *testing.T) {
	reg, enc, dec := codecs(t, schema.Avro, orderSchema)
	b := mustEncode(t, enc, orderJSON)
	if b[0] != 0 || b[4] != byte(enc.Subject().ID) {
		t.Fatalf("header %x, want magic 0 and id %d", b[:5], enc.Subject().ID)
	}
	sameJSON(t, mustDecode(t, dec, b), orderJSON)

	// The library reads the same binary into the same values.
	sch := avro.MustParse(orderSchema)
	var got map[string]any
	if _, err := sch.Decode(b[5:], &got); err != nil {
		t.Fatalf("twmb/avro cannot read the encoding: %v", err)
	}
	if got["amount_cents"] != int64(9007199254740993) || got["status"] != "PAID" || got["qty"] != int32(3) {
		t.Errorf("twmb/avro read %v", got)
	}

	// A second decode of a known id costs no registry call.
	calls := reg.Calls("SchemaByID")
	mustDecode(t, dec, b)
	if reg.Calls("SchemaByID") != calls {
		t.Errorf("a second decode called the registry again")
	}
}

// TestAvroDefaults checks that missing fields take their defaults.
func TestAvroDefaults(t *testing.T) {
	_, enc, dec := codecs(t, schema.Avro, `{"type":"record","name":"R","fields":[
	  {"name":"a","type":"int"},
	  {"name":"n","type":["null","string"],"default":null},
	  {"name":"s","type":"string","default":"x"},
	  {"name":"l","type":"long","default":7},
	  {"name":"b","type":"bytes","default":"\u00ff"},
	  {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":2},"default":"\u0001"},
	  {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]},"default":"B"},
	  {"name":"u","type":["int","string"],"default":5},
	  {"name":"m","type":{"type":"map","values":"int"},"default":{"k":1}},
	  {"name":"arr","type":{"type":"array","items":"double"},"default":[1.5]},
	  {"name":"f","type":{"type":"fixed","name":"F","size":2},"default":"ab"},
	  {"name":"r","type":{"type":"record","name":"In","fields":[{"name":"x","type":["long","string"]},{"name":"y","type":["string","null"]}]},
	   "default":{"x":3,"y":"z"}}]}`)
	got := mustDecode(t, dec, mustEncode(t, enc, `{"a":1}`))
	sameJSON(t, got, `{"a":1,"n":null,"s":"x","l":7,"b":"/w==","d":"0.01","e":"B","u":{"int":5},"m":{"k":1},"arr":[1.5],"f":"YWI=","r":{"x":{"long":3},"y":"z"}}`)
}

// TestAvroLogicalTypes checks each logical type's JSON form.
func TestAvroLogicalTypes(t *testing.T) {
	_, enc, dec := codecs(t, schema.Avro, `{"type":"record","name":"L","fields":[
	  {"name":"date","type":{"type":"int","logicalType":"date"}},
	  {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
	  {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
	  {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
	  {"name":"lts","type":{"type":"long","logicalType":"local-timestamp-millis"}},
	  {"name":"id","type":{"type":"string","logicalType":"uuid"}},
	  {"name":"neg","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":3}},
	  {"name":"small","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":3}},
	  {"name":"fx","type":{"type":"fixed","name":"D","size":8,"logicalType":"decimal","precision":18,"scale":0}}]}`)
	js := `{"date":19700,"tm":3723004,"tu":3723004005,"ts":1700000000123456,"lts":-5,
	  "id":"0b8e7d4e-5f7a-4c52-9a4b-1f6e8e2c9d10","neg":"-1.280","small":"0.005","fx":"-42"}`
	sameJSON(t, mustDecode(t, dec, mustEncode(t, enc, js)), js)
}

// TestAvroUnions checks null, nullable and general unions.
func TestAvroUnions(t *testing.T) {
	_, enc, dec := codecs(t, schema.Avro, `{"type":"record","name":"U","namespace":"ns","fields":[
	  {"name":"a","type":["string","null"]},
	  {"name":"b","type":["null","int","string",{"type":"record","name":"P","fields":[{"name":"x","type":"int"}]}]}]}`)
	for _, js := range []string{
		`{"a":null,"b":null}`,
		`{"a":"s","b":{"int":4}}`,
		`{"a":"s","b":{"string":"four"}}`,
		`{"a":"s","b":{"ns.P":{"x":1}}}`,
	} {
		sameJSON(t, mustDecode(t, dec, mustEncode(t, enc, js)), js)
	}
	_, err := enc.Encode(nil, []byte(`{"a":"s","b":4}`))
	wantFault(t, err, schema.FaultRecord, "field b", "ns.P")
	_, err = enc.Encode(nil, []byte(`{"a":"s","b":{"long":4}}`))
	wantFault(t, err, schema.FaultRecord, `"long" is not a branch`)
}

// TestAvroEncodeFaults checks that values that do not fit are the
// record's fault, with messages that name the field.
func TestAvroEncodeFaults(t *testing.T) {
	_, enc, _ := codecs(t, schema.Avro, orderSchema)
	cases := []struct {
		name, js string
		says     []string
	}{
		{"fraction for long", `"amount_cents":12.5`, []string{"field amount_cents: 12.5 is not a long"}},
		{"long out of range", `"amount_cents":9223372036854775808`, []string{"field amount_cents: 9223372036854775808 is out of the range of a long"}},
		{"exponent for long", `"amount_cents":1e3`, []string{"1e3 is not a long"}},
		{"int out of range", `"qty":2147483648`, []string{"field qty: 2147483648 is out of the range of an int"}},
		{"string for int", `"qty":"3"`, []string{`field qty: "3" is not an int`}},
		{"bad enum", `"status":"LOST"`, []string{"field status: \"LOST\" is not a symbol of enum shop.Status"}},
		{"decimal places", `"price":"1.234"`, []string{"field price", "more than 2 digits after the point"}},
		{"decimal precision", `"price":"12345678901.00"`, []string{"field price", "more than the 12 digits"}},
		{"not a decimal", `"price":"12,3"`, []string{"field price", "is not a decimal"}},
		{"nested field", `"items":[{"sku":1}]`, []string{"field items[0].sku: 1 is not a string"}},
		{"bool", `"paid":"yes"`, []string{"field paid", "not a boolean"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			js := replaceField(t, orderJSON, c.js)
			out, err := enc.Encode([]byte("keep"), []byte(js))
			wantFault(t, err, schema.FaultRecord, c.says...)
			if string(out) != "keep" {
				t.Errorf("dst after a failure is %q, want it as it was", out)
			}
		})
	}
	_, err := enc.Encode(nil, []byte(`{"id":"x"}`))
	wantFault(t, err, schema.FaultRecord, "field amount_cents: missing")
	_, err = enc.Encode(nil, []byte(orderJSON[:len(orderJSON)-1]+`,"extra":1}`))
	wantFault(t, err, schema.FaultRecord, "field extra: not in the schema")
	_, err = enc.Encode(nil, []byte(`{"id":`))
	wantFault(t, err, schema.FaultRecord, "not valid JSON")
	_, err = enc.Encode(nil, []byte(orderJSON+` {}`))
	wantFault(t, err, schema.FaultRecord, "more than one value")
}

// replaceField replaces one "key":value pair of orderJSON by kv.
func replaceField(t *testing.T, js, kv string) string {
	t.Helper()
	key := kv[:bytes.IndexByte([]byte(kv), ':')]
	i := bytes.Index([]byte(js), []byte(key+":"))
	if i < 0 {
		t.Fatalf("no %s in %s", key, js)
	}
	end := i + len(key) + 1
	depth := 0
	for ; end < len(js); end++ {
		switch js[end] {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		}
		if depth < 0 || (depth == 0 && js[end] == ',') {
			break
		}
	}
	return js[:i] + kv + js[end:]
}

// TestAvroDecodeFaults checks payloads that do not decode.
func TestAvroDecodeFaults(t *testing.T) {
	_, enc, dec := codecs(t, schema.Avro, orderSchema)
	b := mustEncode(t, enc, orderJSON)
	_, err := dec.Decode(context.Background(), b[:len(b)-3], nil)
	wantFault(t, err, schema.FaultRecord, "does not decode as avro schema id 1")

	_, err = dec.Decode(context.Background(), append(append([]byte{}, b...), 0), nil)
	wantFault(t, err, schema.FaultRecord, "bytes are left after the value")

	_, encS, decS := codecs(t, schema.Avro, `"string"`)
	sb := mustEncode(t, encS, `"ab"`)
	sb[6] = 0xff
	_, err = decS.Decode(context.Background(), sb, nil)
	wantFault(t, err, schema.FaultRecord, "not valid UTF-8")

	_, _, decN := codecs(t, schema.Avro, `{"type":"array","items":"null"}`)
	_, err = decN.Decode(context.Background(), []byte{0, 0, 0, 0, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0}, nil) // 2^31-1 nulls
	wantFault(t, err, schema.FaultRecord, "items, more than")
	// Blocks of nulls within the per-block bound, 4,097 in all: each block
	// is 2 bytes (a count of 1 << 10 - 1 is two varint bytes), and one
	// payload takes no more than 4,096 items that take no bytes.
	nulls := []byte{0, 0, 0, 0, 1}
	for range 4 {
		nulls = append(nulls, 0x80, 0x10) // 1,024 items
	}
	_, err = decN.Decode(context.Background(), append(append([]byte{}, nulls...), 0), nil)
	if err != nil {
		t.Fatalf("4,096 nulls: %v", err)
	}
	_, err = decN.Decode(context.Background(), append(nulls, 2, 0), nil)
	wantFault(t, err, schema.FaultRecord, "more than 4096 items that take no bytes")

	_, encE, decE := codecs(t, schema.Avro, `{"type":"enum","name":"E","symbols":["A"]}`)
	eb := mustEncode(t, encE, `"A"`)
	eb[5] = 8 // symbol index 4
	_, err = decE.Decode(context.Background(), eb, nil)
	wantFault(t, err, schema.FaultRecord, "out of range")
}

// TestAvroReferences checks a schema whose named type comes from a
// registry reference.
func TestAvroReferences(t *testing.T) {
	reg, _, _ := codecs(t, schema.Avro, `"int"`)
	reg.MustRegister("money", schema.Schema{Type: schema.Avro, Text: `{"type":"record","name":"Money","namespace":"m","fields":[{"name":"cents","type":"long"}]}`})
	sub := reg.MustRegister("pay-value", schema.Schema{Type: schema.Avro,
		Text:       `{"type":"record","name":"Pay","fields":[{"name":"amount","type":"m.Money"}]}`,
		References: []schema.Reference{{Name: "m.Money", Subject: "money", Version: 1}}})
	enc, err := schema.NewEncoder(context.Background(), reg, sub, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dec := schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{})
	js := `{"amount":{"cents":5}}`
	sameJSON(t, mustDecode(t, dec, mustEncode(t, enc, js)), js)
}

// TestAvroJSONInput checks escaped keys, duplicate keys and whitespace
// in the JSON given to the encoder.
func TestAvroJSONInput(t *testing.T) {
	_, enc, dec := codecs(t, schema.Avro, `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},
	  {"name":"m","type":{"type":"map","values":"long"}}]}`)
	got := mustDecode(t, dec, mustEncode(t, enc, " {\"\\u0069d\" : \"a\\u00e9\\n\", \"m\": {\"z\\\"q\": 1, \"a\": 2}} "))
	if want := `{"id":"aé\n","m":{"z\"q":1,"a":2}}`; got != want {
		t.Errorf("got %s, want %s (map keys in order)", got, want)
	}
	_, err := enc.Encode(nil, []byte(`{"id":"a","id":"b","m":{}}`))
	wantFault(t, err, schema.FaultRecord, "not valid JSON", "duplicate")
}

// TestAvroNullableWithoutDefault checks that a nullable field without a
// default must be given (twmb/avro lends it an implicit null default
// when it encodes Go maps; the codec, as the specification, does not),
// and that a union's default takes the first branch that fits it.
func TestAvroNullableWithoutDefault(t *testing.T) {
	_, enc, dec := codecs(t, schema.Avro, `{"type":"record","name":"R","fields":[
	  {"name":"a","type":"int"},
	  {"name":"n","type":["null","string"]},
	  {"name":"s","type":["null","string"],"default":"x"},
	  {"name":"f","type":["int","float"],"default":1.5}]}`)
	_, err := enc.Encode(nil, []byte(`{"a":1}`))
	wantFault(t, err, schema.FaultRecord, "field n: missing")
	got := mustDecode(t, dec, mustEncode(t, enc, `{"a":1,"n":null}`))
	sameJSON(t, got, `{"a":1,"n":null,"s":"x","f":{"float":1.5}}`)
}
