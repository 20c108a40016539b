package integration

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

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
