package schema_test

import (
	"context"
	"testing"

	"github.com/streamproc/processor/schema"
)

// benchAvroSchema is a 10-field record of mixed types.
const benchAvroSchema = `{
  "type": "record", "name": "Order", "namespace": "bench",
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
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
      {"name": "name", "type": "string"}, {"name": "tier", "type": "int"}]}}
  ]}`

const benchAvroJSON = `{"id":"order-000123","amount_cents":123456,"qty":3,"rate":0.175,"paid":true,"note":"leave at door",
  "status":"PAID","created":1700000000123,"price":"1234.56","customer":{"name":"Ada Lovelace","tier":2}}`

// BenchmarkAvroDecode decodes one 10-field record with a cached schema.
func BenchmarkAvroDecode(b *testing.B) {
	_, enc, dec := codecs(b, schema.Avro, benchAvroSchema)
	benchDecode(b, dec, mustEncode(b, enc, benchAvroJSON))
}

// BenchmarkAvroEncode encodes one 10-field record.
func BenchmarkAvroEncode(b *testing.B) {
	_, enc, _ := codecs(b, schema.Avro, benchAvroSchema)
	benchEncode(b, enc, benchAvroJSON)
}

// benchProto is a Protobuf message like the Avro record.
const benchProto = `syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1; int64 amount_cents = 2; int32 qty = 3; double rate = 4; bool paid = 5;
  optional string note = 6; Status status = 7; google.protobuf.Timestamp created = 8; string price = 9;
  Customer customer = 10;
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Customer { string name = 1; int32 tier = 2; }
}`

const benchProtoJSON = `{"id":"order-000123","amountCents":"123456","qty":3,"rate":0.175,"paid":true,"note":"leave at door",
  "status":"PAID","created":"2023-11-14T22:13:20.123Z","price":"1234.56","customer":{"name":"Ada Lovelace","tier":2}}`

// BenchmarkProtobufDecode decodes one message with a cached schema.
func BenchmarkProtobufDecode(b *testing.B) {
	_, enc, dec := codecs(b, schema.Protobuf, benchProto)
	benchDecode(b, dec, mustEncode(b, enc, benchProtoJSON))
}

// BenchmarkProtobufEncode encodes one message.
func BenchmarkProtobufEncode(b *testing.B) {
	_, enc, _ := codecs(b, schema.Protobuf, benchProto)
	benchEncode(b, enc, benchProtoJSON)
}

// benchJSONSchema validates the same fields.
const benchJSONSchema = `{"type":"object","required":["id","amount_cents"],"properties":{
  "id":{"type":"string"},"amount_cents":{"type":"integer"},"qty":{"type":"integer","minimum":0},"rate":{"type":"number"},
  "paid":{"type":"boolean"},"note":{"type":["string","null"]},"status":{"enum":["NEW","PAID","SHIPPED"]},
  "created":{"type":"integer"},"price":{"type":"string","pattern":"^-?[0-9]+(\\.[0-9]+)?$"},
  "customer":{"type":"object","properties":{"name":{"type":"string"},"tier":{"type":"integer"}}}},
  "additionalProperties":false}`

// BenchmarkJSONSchemaDecode validates one value with a cached schema.
func BenchmarkJSONSchemaDecode(b *testing.B) {
	_, enc, dec := codecs(b, schema.JSONSchema, benchJSONSchema)
	benchDecode(b, dec, mustEncode(b, enc, benchAvroJSON))
}

// BenchmarkJSONSchemaEncode validates and frames one value.
func BenchmarkJSONSchemaEncode(b *testing.B) {
	_, enc, _ := codecs(b, schema.JSONSchema, benchJSONSchema)
	benchEncode(b, enc, benchAvroJSON)
}

// benchDecode decodes rec b.N times into a reused buffer.
func benchDecode(b *testing.B, dec *schema.Decoder, rec []byte) {
	ctx := context.Background()
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		if dst, err = dec.Decode(ctx, rec, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchEncode encodes js b.N times into a reused buffer.
func benchEncode(b *testing.B, enc *schema.Encoder, js string) {
	in := []byte(js)
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		if dst, err = enc.Encode(dst[:0], in); err != nil {
			b.Fatal(err)
		}
	}
}
