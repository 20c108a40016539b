package schema_test

import (
	"context"
	"testing"

	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/schematest"
)

const orderProto = `syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";
import "money.proto";

message Order {
  string id = 1;
  int64 amount_cents = 2;
  google.protobuf.Timestamp created = 3;
  repeated Line lines = 4;
  common.Money total = 5;
  Status status = 6;
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; uint32 count = 2; }
}

message Refund {
  string order_id = 1;
  message Reason { string text = 1; }
  Reason reason = 2;
}
`

const moneyProto = `syntax = "proto3";
package common;
message Money { string currency = 1; int64 units = 2; }
`

// protoRegistry registers money.proto and orderProto (referencing it).
func protoRegistry(t *testing.T) (*schematest.Memory, schema.Subject) {
	t.Helper()
	reg := schematest.NewMemory()
	reg.MustRegister("money", schema.Schema{Type: schema.Protobuf, Text: moneyProto})
	sub := reg.MustRegister("orders-value", schema.Schema{Type: schema.Protobuf, Text: orderProto,
		References: []schema.Reference{{Name: "money.proto", Subject: "money", Version: 1}}})
	return reg, sub
}

// TestProtobufRoundTrip checks the protojson mapping with a well-known
// type and a registry reference, for the first message and for a
// nested one chosen by name.
func TestProtobufRoundTrip(t *testing.T) {
	reg, sub := protoRegistry(t)
	ctx := context.Background()
	dec := schema.NewDecoder(reg, schema.Protobuf, schema.DecoderOptions{})
	enc, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	js := `{"id":"o-1","amountCents":"9007199254740993","created":"2024-01-02T03:04:05.123Z",
	  "lines":[{"sku":"a","count":2}],"total":{"currency":"EUR","units":"12"},"status":"PAID"}`
	b := mustEncode(t, enc, js)
	if b[5] != 0 {
		t.Errorf("first message: index byte %d, want the 0 shortcut", b[5])
	}
	sameJSON(t, mustDecode(t, dec, b), js)

	enc2, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{Message: "shop.v1.Refund.Reason"})
	if err != nil {
		t.Fatal(err)
	}
	b2 := mustEncode(t, enc2, `{"text":"late"}`)
	// Indexes [1, 0]: count 2, then 1 and 0, as zigzag varints.
	if got := b2[5:8]; got[0] != 4 || got[1] != 2 || got[2] != 0 {
		t.Errorf("message indexes %x, want 04 02 00", got)
	}
	sameJSON(t, mustDecode(t, dec, b2), `{"text":"late"}`)

	// Unpopulated fields are left out.
	sameJSON(t, mustDecode(t, dec, mustEncode(t, enc, `{"id":"x"}`)), `{"id":"x"}`)
}

// TestProtobufFaults checks the faults of Protobuf encoding, decoding
// and compiling.
func TestProtobufFaults(t *testing.T) {
	reg, sub := protoRegistry(t)
	ctx := context.Background()
	enc, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = enc.Encode(nil, []byte(`{"id":"x","colour":"red"}`))
	wantFault(t, err, schema.FaultRecord, "colour")
	_, err = enc.Encode(nil, []byte(`{"amountCents":"1.5"}`))
	wantFault(t, err, schema.FaultRecord, "amount")

	dec := schema.NewDecoder(reg, schema.Protobuf, schema.DecoderOptions{})
	b := mustEncode(t, enc, `{"id":"o-1"}`)
	bad := append(append([]byte{}, b[:6]...), 0x0a, 0x10, 'x') // field 1 claims 16 bytes
	_, err = dec.Decode(ctx, bad, nil)
	wantFault(t, err, schema.FaultRecord, "does not decode as protobuf schema id")
	wrongIdx := append(append([]byte{}, b[:5]...), 2, 18) // [9]
	_, err = dec.Decode(ctx, append(wrongIdx, b[6:]...), nil)
	wantFault(t, err, schema.FaultRecord, "message index [9]")

	_, err = schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{Message: "shop.v1.Nope"})
	wantFault(t, err, schema.FaultSchema, `no message "shop.v1.Nope"`)

	broken := reg.MustRegister("broken", schema.Schema{Type: schema.Protobuf, Text: `syntax = "proto3"; message M { strin x = 1; }`})
	_, err = schema.NewEncoder(ctx, reg, broken, schema.EncoderOptions{})
	wantFault(t, err, schema.FaultSchema, "does not compile")

	missing := reg.MustRegister("missing", schema.Schema{Type: schema.Protobuf, Text: `syntax = "proto3"; import "other.proto"; message M {}`})
	_, err = schema.NewEncoder(ctx, reg, missing, schema.EncoderOptions{})
	wantFault(t, err, schema.FaultSchema, "other.proto")

	badRef := reg.MustRegister("badref", schema.Schema{Type: schema.Protobuf, Text: `syntax = "proto3"; message M {}`,
		References: []schema.Reference{{Name: "x.proto", Subject: "nobody", Version: 3}}})
	_, err = schema.NewEncoder(ctx, reg, badRef, schema.EncoderOptions{})
	wantFault(t, err, schema.FaultSchema, `reference "x.proto"`)
}
