package schemas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/interop"
	"github.com/streamproc/processor/schema"
)

// Interop with Confluent's own clients: records written by Confluent's
// Python AvroSerializer and ProtobufSerializer (which registers the
// writer's schema itself) go through the processor, which doubles qty
// with jq and encodes with the output schema file it registers at start;
// Confluent's AvroDeserializer and ProtobufDeserializer read every output,
// read_committed, as the input with qty doubled, in the input's order,
// with the processor's lineage headers. Needs PROCESSOR_TEST_PYTHON and
// PROCESSOR_TEST_SCHEMA_REGISTRY_URL (skipped without them, failed in CI).
func TestSchemaInteropConfluentClients(t *testing.T) {
	t.Parallel()
	interop.Python(t)
	reg := interop.RegistryURL(t)
	r := &itest.SREnv{Name: "registry", URL: reg}
	cases := []struct {
		format string
		f      schema.Format
		file   string
	}{
		{interop.Avro, schema.Avro, "order.avsc"},
		{interop.Protobuf, schema.Protobuf, "order.proto"},
	}
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		for _, tc := range cases {
			t.Run(tc.format, func(t *testing.T) {
				const n = 20
				file, err := filepath.Abs(filepath.Join("..", "registry", "testdata", tc.file))
				if err != nil {
					t.Fatal(err)
				}
				in, out, group := itest.Unique("sr-interop-in"), itest.Unique("sr-interop-out"), itest.Unique("sr-interop-group")
				tg.NewTopics(t, 1, in, out)
				opts := interop.Options{Brokers: tg.Brokers, Registry: reg, Topic: in, Format: tc.format, SchemaFile: file, Timeout: 90 * time.Second}
				var recs []interop.Record
				for i := 1; i <= n; i++ {
					v := map[string]any{"id": fmt.Sprintf("order-%d", i), "qty": float64(i), "price": 0.25 * float64(i)}
					if tc.f == schema.Protobuf {
						v["tags"] = []any{"t", fmt.Sprint(i)}
					} else if i%2 == 0 {
						v["note"] = fmt.Sprintf("note %d", i)
					} else {
						v["note"] = nil
					}
					recs = append(recs, interop.Record{Key: fmt.Sprintf("k%d", i), Value: v})
				}
				interop.Produce(t, opts, recs)

				inst := tg.SchemaInstance(r, group, in, out, tc.f, ".qty *= 2")
				inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE="+file)
				p := itest.RunBinary(t, group, inst)
				tg.WaitCaughtUpWithin(t, 90*time.Second, group, in)
				p.Terminate(t)

				opts.Topic = out
				got := interop.Consume(t, opts, n)
				if len(got) != n {
					t.Fatalf("Confluent's deserializer read %d outputs, want %d", len(got), n)
				}
				for i, rec := range got {
					want := map[string]any{}
					for k, v := range recs[i].Value {
						want[k] = v
					}
					want["qty"] = 2 * recs[i].Value["qty"].(float64)
					if rec["key"] != recs[i].Key || !reflect.DeepEqual(rec["value"], want) {
						t.Errorf("output %d: key %v value %v, want %s %v", i, rec["key"], rec["value"], recs[i].Key, want)
					}
					h, _ := rec["headers"].(map[string]any)
					if want := fmt.Sprintf("%s/0/%d", in, i); h["processor.source"] != want {
						t.Errorf("output %d: lineage headers %v, want processor.source %s", i, rec["headers"], want)
					}
				}
			})
		}
	})
}

// Protobuf beyond one flat file: an input Order whose schema imports
// another file (registered as a subject of its own and referenced by
// the Order's schema) decodes, the processor resolving the reference;
// qty is doubled and the output is encoded with a schema file whose
// Order is its second message (PROCESSOR_OUTPUT_VALUE_MESSAGE), so the
// header's message-index list is [1], not the default. The outputs
// decode to the input with qty doubled, with the schema package and, on
// the real registry, with Confluent's ProtobufDeserializer (which needs
// PROCESSOR_TEST_PYTHON: skipped without it, failed in CI).
func TestSchemaProtobufReferences(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		const n = 10
		dir := t.TempDir()
		money := strings.ReplaceAll(itest.Unique("money"), "-", "_")
		moneyText := "syntax = \"proto3\";\npackage interop." + money + ";\nmessage Money { string currency = 1; int64 units = 2; }\n"
		orderText := "syntax = \"proto3\";\npackage interop.ref;\nimport \"" + money + ".proto\";\n" +
			"message Order { string id = 1; int32 qty = 2; interop." + money + ".Money total = 3; }\n"
		flat := filepath.Join(dir, "order_flat.proto")
		flatText := "syntax = \"proto3\";\npackage interop.flat;\nmessage Money { string currency = 1; int64 units = 2; }\n" +
			"message Order { string id = 1; int32 qty = 2; Money total = 3; }\n"
		if err := os.WriteFile(flat, []byte(flatText), 0o600); err != nil {
			t.Fatal(err)
		}
		in, out, group := itest.Unique("sr-protoref-in"), itest.Unique("sr-protoref-out"), itest.Unique("sr-protoref-group")
		tg.NewTopics(t, 1, in, out)
		m := r.Register(t, money+".proto", schema.Protobuf, moneyText)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		order, err := r.Reg.Register(ctx, in+"-value", schema.Schema{Type: schema.Protobuf, Text: orderText,
			References: []schema.Reference{{Name: money + ".proto", Subject: m.Subject, Version: m.Version}}})
		if err != nil {
			t.Fatal(err)
		}
		enc := r.Encoder(t, order)
		var recs []*kgo.Record
		for i := 1; i <= n; i++ {
			js := fmt.Sprintf(`{"id":"order-%d","qty":%d,"total":{"currency":"EUR","units":"%d"}}`, i, i, 100*i)
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", i)), Value: encode(t, enc, js)})
		}
		tg.SyncProduce(t, recs...)

		inst := tg.SchemaInstance(r, group, in, out, schema.Protobuf, ".qty *= 2")
		inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE="+flat, "PROCESSOR_OUTPUT_VALUE_MESSAGE=interop.flat.Order")
		p := itest.RunBinary(t, group, inst)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)

		want := func(i int) map[string]any {
			return map[string]any{"id": fmt.Sprintf("order-%d", i), "qty": float64(2 * i), "total": map[string]any{"currency": "EUR", "units": fmt.Sprint(100 * i)}}
		}
		dec := schema.NewDecoder(r.Reg, schema.Protobuf, schema.DecoderOptions{})
		outs := tg.ReadAll(t, out, true)
		if len(outs) != n {
			t.Fatalf("%d outputs, want %d", len(outs), n)
		}
		for i, o := range outs {
			if len(o.Value) < 7 || !bytes.Equal(o.Value[5:7], []byte{2, 2}) {
				t.Errorf("output %d: header %x, want the message-index list [1] (02 02) after the id", i, o.Value[:min(len(o.Value), 7)])
			}
			js, err := dec.Decode(context.Background(), o.Value, nil)
			var got map[string]any
			if err == nil {
				err = json.Unmarshal(js, &got)
			}
			if err != nil || !reflect.DeepEqual(got, want(i+1)) {
				t.Errorf("output %d: %v, %v; want %v", i, got, err, want(i+1))
			}
		}
		if r.Name != "registry" {
			return
		}
		interop.Python(t)
		opts := interop.Options{Brokers: tg.Brokers, Registry: r.URL, Topic: out, Format: interop.Protobuf,
			SchemaFile: flat, Message: "interop.flat.Order", Timeout: 90 * time.Second}
		for i, rec := range interop.Consume(t, opts, n) {
			if rec["key"] != fmt.Sprintf("k%d", i+1) || !reflect.DeepEqual(rec["value"], want(i+1)) {
				t.Errorf("Confluent's deserializer read output %d as key %v value %v, want k%d %v", i, rec["key"], rec["value"], i+1, want(i+1))
			}
		}
	})
}

// richAvro is an Avro schema with a field of every kind the mapping to
// JSON handles: primitives, bytes and fixed, an enum, an array, a map,
// nullable and general unions, logical types and a nested record.
const richAvro = `{"type":"record","name":"Rich","namespace":"e2e","fields":[
 {"name":"id","type":"string"},
 {"name":"big","type":"long"},
 {"name":"ratio","type":"float"},
 {"name":"price","type":"double"},
 {"name":"ok","type":"boolean"},
 {"name":"raw","type":"bytes"},
 {"name":"fx","type":{"type":"fixed","name":"Fx","size":4}},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C"]}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"int"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"choice","type":["null","int","string"],"default":null},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"nested","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}}
]}`

// richValues are values of richAvro in the processor's JSON mapping, map
// keys sorted (jq writes objects with sorted keys).
var richValues = []string{
	`{"id":"r0","big":9007199254740993,"ratio":0.1,"price":1e-7,"ok":true,"raw":"AAEC/w==","fx":"AQIDBA==","kind":"B","tags":["a","b"],` +
		`"attrs":{"a":1,"b":-2},"note":"hi","choice":{"int":5},"amount":"-12.34","at":1700000000123,"uid":"0b8a6f7e-1c2d-4e5f-8a9b-0c1d2e3f4a5b","nested":{"x":7}}`,
	`{"id":"r1","big":-9223372036854775808,"ratio":3.4028235e38,"price":2.5,"ok":false,"raw":"","fx":"AAAAAA==","kind":"C","tags":[],` +
		`"attrs":{},"note":null,"choice":{"string":"s"},"amount":"0.00","at":0,"uid":"00000000-0000-4000-8000-000000000000","nested":{"x":0}}`,
	`{"id":"r2","big":9223372036854775807,"ratio":-1.5,"price":123456789.125,"ok":true,"raw":"3q2+7w==","fx":"/////w==","kind":"A","tags":["x"],` +
		`"attrs":{"k":2147483647},"note":"","choice":null,"amount":"9999999999.99","at":-1,"uid":"ffffffff-ffff-4fff-bfff-ffffffffffff","nested":{"x":-2147483648}}`,
}

// Avro values of every kind survive the trip through a chain that reads
// them (jq '.' decodes to JSON and encodes again) bit for bit: each
// output's payload is its input's, behind the output subject's schema
// id, 64-bit longs at their limits, floats, bytes, fixed, decimals and
// unions included; on the real registry Confluent's AvroDeserializer
// reads the outputs with the same values (needs PROCESSOR_TEST_PYTHON:
// skipped without it, failed in CI).
func TestSchemaAvroRoundTrip(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		in, out, group := itest.Unique("sr-rich-in"), itest.Unique("sr-rich-out"), itest.Unique("sr-rich-group")
		tg.NewTopics(t, 1, in, out)
		enc := r.Encoder(t, r.Register(t, in+"-value", schema.Avro, richAvro))
		outSubj := r.Register(t, out+"-value", schema.Avro, richAvro)
		var recs []*kgo.Record
		for i, js := range richValues {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", i)), Value: encode(t, enc, js)})
		}
		tg.SyncProduce(t, recs...)
		p := itest.RunBinary(t, group, tg.SchemaInstance(r, group, in, out, schema.Avro, "."))
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)
		outs := tg.ReadAll(t, out, true)
		if len(outs) != len(recs) {
			t.Fatalf("%d outputs, want %d", len(outs), len(recs))
		}
		for i, o := range outs {
			if wireID(o.Value) != outSubj.ID || len(o.Value) < 5 || !bytes.Equal(o.Value[5:], recs[i].Value[5:]) {
				t.Errorf("output %d: schema id %d payload %x; want id %d and the input's payload %x", i, wireID(o.Value), o.Value[min(5, len(o.Value)):], outSubj.ID, recs[i].Value[5:])
			}
		}
		if r.Name != "registry" {
			return
		}
		interop.Python(t)
		got := interop.Consume(t, interop.Options{Brokers: tg.Brokers, Registry: r.URL, Topic: out, Format: interop.Avro, Timeout: 90 * time.Second}, len(recs))
		for i, rec := range got {
			// Numbers as float64 on both sides: interop.Consume reads
			// the script's JSON so (the payloads above are compared
			// exactly).
			var want map[string]any
			if err := json.Unmarshal([]byte(richValues[i]), &want); err != nil {
				t.Fatal(err)
			}
			v, _ := rec["value"].(map[string]any)
			for _, f := range []string{"id", "big", "kind", "tags", "attrs", "note", "raw", "fx", "amount", "uid", "nested"} {
				if g, w := fmt.Sprint(v[f]), fmt.Sprint(want[f]); g != w {
					t.Errorf("Confluent's deserializer read output %d field %s as %s, want %s", i, f, g, w)
				}
			}
			if c, _ := want["choice"].(map[string]any); fmt.Sprint(v["choice"]) != fmt.Sprint(firstValue(c)) {
				t.Errorf("Confluent's deserializer read output %d choice as %v, want %v", i, v["choice"], firstValue(c))
			}
		}
	})
}

// firstValue is the value of a one-key object (a union branch), nil for
// none.
func firstValue(m map[string]any) any {
	for _, v := range m {
		return v
	}
	return nil
}
