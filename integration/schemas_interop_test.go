package integration

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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/interop"
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
	r := &srEnv{name: "registry", url: reg}
	cases := []struct {
		format string
		f      schema.Format
		file   string
	}{
		{interop.Avro, schema.Avro, "order.avsc"},
		{interop.Protobuf, schema.Protobuf, "order.proto"},
	}
	forEachTarget(t, func(t *testing.T, tg *target) {
		for _, tc := range cases {
			t.Run(tc.format, func(t *testing.T) {
				const n = 20
				file, err := filepath.Abs(filepath.Join("registry", "testdata", tc.file))
				if err != nil {
					t.Fatal(err)
				}
				in, out, group := unique("sr-interop-in"), unique("sr-interop-out"), unique("sr-interop-group")
				tg.createTopics(t, 1, in, out)
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

				inst := tg.schemaInstance(r, group, in, out, tc.f, ".qty *= 2")
				inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE="+file)
				p := runBinary(t, group, inst)
				tg.waitCaughtUpWithin(t, 90*time.Second, group, in)
				p.terminate(t)

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
					if h["processor.source.topic"] != in || h["processor.source.offset"] != fmt.Sprint(i) {
						t.Errorf("output %d: lineage headers %v, want source %s offset %d", i, rec["headers"], in, i)
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
	forEachSchemaTarget(t, func(t *testing.T, tg *target, r *srEnv) {
		const n = 10
		dir := t.TempDir()
		money := strings.ReplaceAll(unique("money"), "-", "_")
		moneyText := "syntax = \"proto3\";\npackage interop." + money + ";\nmessage Money { string currency = 1; int64 units = 2; }\n"
		orderText := "syntax = \"proto3\";\npackage interop.ref;\nimport \"" + money + ".proto\";\n" +
			"message Order { string id = 1; int32 qty = 2; interop." + money + ".Money total = 3; }\n"
		flat := filepath.Join(dir, "order_flat.proto")
		flatText := "syntax = \"proto3\";\npackage interop.flat;\nmessage Money { string currency = 1; int64 units = 2; }\n" +
			"message Order { string id = 1; int32 qty = 2; Money total = 3; }\n"
		if err := os.WriteFile(flat, []byte(flatText), 0o600); err != nil {
			t.Fatal(err)
		}
		in, out, group := unique("sr-protoref-in"), unique("sr-protoref-out"), unique("sr-protoref-group")
		tg.createTopics(t, 1, in, out)
		m := r.register(t, money+".proto", schema.Protobuf, moneyText)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		order, err := r.reg.Register(ctx, in+"-value", schema.Schema{Type: schema.Protobuf, Text: orderText,
			References: []schema.Reference{{Name: money + ".proto", Subject: m.Subject, Version: m.Version}}})
		if err != nil {
			t.Fatal(err)
		}
		enc := r.encoder(t, order)
		var recs []*kgo.Record
		for i := 1; i <= n; i++ {
			js := fmt.Sprintf(`{"id":"order-%d","qty":%d,"total":{"currency":"EUR","units":"%d"}}`, i, i, 100*i)
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", i)), Value: encode(t, enc, js)})
		}
		tg.produceSync(t, recs...)

		inst := tg.schemaInstance(r, group, in, out, schema.Protobuf, ".qty *= 2")
		inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE="+flat, "PROCESSOR_OUTPUT_VALUE_MESSAGE=interop.flat.Order")
		p := runBinary(t, group, inst)
		tg.waitCaughtUpWithin(t, 60*time.Second, group, in)
		p.terminate(t)

		want := func(i int) map[string]any {
			return map[string]any{"id": fmt.Sprintf("order-%d", i), "qty": float64(2 * i), "total": map[string]any{"currency": "EUR", "units": fmt.Sprint(100 * i)}}
		}
		dec := schema.NewDecoder(r.reg, schema.Protobuf, schema.DecoderOptions{})
		outs := tg.readAll(t, out, true)
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
		if r.name != "registry" {
			return
		}
		interop.Python(t)
		opts := interop.Options{Brokers: tg.Brokers, Registry: r.url, Topic: out, Format: interop.Protobuf,
			SchemaFile: flat, Message: "interop.flat.Order", Timeout: 90 * time.Second}
		for i, rec := range interop.Consume(t, opts, n) {
			if rec["key"] != fmt.Sprintf("k%d", i+1) || !reflect.DeepEqual(rec["value"], want(i+1)) {
				t.Errorf("Confluent's deserializer read output %d as key %v value %v, want k%d %v", i, rec["key"], rec["value"], i+1, want(i+1))
			}
		}
	})
}
