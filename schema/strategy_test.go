package schema_test

import (
	"context"
	"testing"

	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/schematest"
)

// The subject each strategy names, as Confluent's serdes name it.
func TestSubjectStrategies(t *testing.T) {
	for _, tc := range []struct {
		strategy      string
		topic, suffix string
		record, want  string
	}{
		{"", "orders", "-value", "shop.Order", "orders-value"},
		{"topic", "orders", "-key", "shop.Order", "orders-key"},
		{"record", "orders", "-value", "shop.Order", "shop.Order"},
		{"topic_record", "orders", "-value", "shop.Order", "orders-shop.Order"},
		{"topic_record", "orders", "-key", "shop.OrderKey", "orders-shop.OrderKey"},
	} {
		s, err := schema.ParseSubjectStrategy(tc.strategy)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Subject(tc.topic, tc.suffix, tc.record); got != tc.want {
			t.Errorf("%q: Subject(%s, %s, %s) = %q, want %q", tc.strategy, tc.topic, tc.suffix, tc.record, got, tc.want)
		}
		if s.ByRecord() != (tc.strategy == "record" || tc.strategy == "topic_record") {
			t.Errorf("%q: ByRecord() = %v", tc.strategy, s.ByRecord())
		}
	}
	if _, err := schema.ParseSubjectStrategy("RecordNameStrategy"); err == nil {
		t.Error("ParseSubjectStrategy accepts a Java class's name")
	}
}

// RecordName derives the record name as Confluent's serializers do, and
// DecodeNamed gives the same name for a record written with the schema
// (for Protobuf, of the message its indexes name).
func TestRecordName(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		format  schema.Format
		text    string
		message string
		want    string // "" : none, a schema fault
		value   string
	}{
		{"avro record with a namespace", schema.Avro, `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"}]}`, "", "shop.Order", `{"id":"a"}`},
		{"avro record without a namespace", schema.Avro, `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`, "", "Order", `{"id":"a"}`},
		{"avro dotted name wins over the namespace", schema.Avro, `{"type":"record","name":"a.b.Order","namespace":"x","fields":[]}`, "", "a.b.Order", `{}`},
		{"avro enum", schema.Avro, `{"type":"enum","name":"Status","namespace":"shop","symbols":["A","B"]}`, "", "shop.Status", `"B"`},
		{"avro fixed", schema.Avro, `{"type":"fixed","name":"Id","namespace":"shop","size":2}`, "", "shop.Id", `"AAE="`},
		{"avro primitive", schema.Avro, `"string"`, "", "string", `"x"`},
		{"avro primitive object", schema.Avro, `{"type":"long"}`, "", "long", `5`},
		{"avro array", schema.Avro, `{"type":"array","items":"int"}`, "", "array", `[1]`},
		{"avro union", schema.Avro, `["null","string"]`, "", "", `"x"`},
		{"protobuf first message", schema.Protobuf, "syntax = \"proto3\";\npackage shop.v1;\nmessage Order { string id = 1; }\nmessage Refund { string id = 1; }\n", "", "shop.v1.Order", `{"id":"a"}`},
		{"protobuf a named message", schema.Protobuf, "syntax = \"proto3\";\npackage shop.v1;\nmessage Order { string id = 1; }\nmessage Refund { string id = 1; }\n", "shop.v1.Refund", "shop.v1.Refund", `{"id":"a"}`},
		{"protobuf nested message", schema.Protobuf, "syntax = \"proto3\";\npackage shop;\nmessage Outer { message Inner { string id = 1; } }\n", "shop.Outer.Inner", "shop.Outer.Inner", `{"id":"a"}`},
		{"protobuf without a package", schema.Protobuf, "syntax = \"proto3\";\nmessage Order { string id = 1; }\n", "", "Order", `{"id":"a"}`},
		{"json schema title", schema.JSONSchema, `{"title":"Order","type":"object"}`, "", "Order", `{"id":"a"}`},
		{"json schema without a title", schema.JSONSchema, `{"type":"object"}`, "", "", `{"id":"a"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := schematest.NewMemory()
			s := schema.Schema{Type: tc.format, Text: tc.text}
			got, err := schema.RecordName(ctx, reg, s, tc.message)
			if tc.want == "" {
				if schema.FaultOf(err) != schema.FaultSchema {
					t.Errorf("RecordName = %q, %v; want a schema fault", got, err)
				}
			} else if err != nil || got != tc.want {
				t.Errorf("RecordName = %q, %v; want %q", got, err, tc.want)
			}
			sub := reg.MustRegister("t-value", s)
			enc, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{Message: tc.message})
			if err != nil {
				t.Fatal(err)
			}
			b := mustEncode(t, enc, tc.value)
			dec := schema.NewDecoder(reg, tc.format, schema.DecoderOptions{})
			for range 2 { // the second from the cache
				js, name, err := dec.DecodeNamed(ctx, b, nil)
				if err != nil || name != tc.want {
					t.Errorf("DecodeNamed = %s, %q, %v; want the name %q", js, name, err, tc.want)
				}
				sameJSON(t, string(js), mustDecode(t, dec, b))
			}
		})
	}
}
