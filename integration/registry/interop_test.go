// Package registry_test holds the tests of the Schema Registry side of the
// integration: the registry contract (against srserver and the real
// registry of PROCESSOR_TEST_SCHEMA_REGISTRY_URL) and the round trip of
// the interop scripts, Confluent's own serializers.
package registry_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/streamproc/processor/internal/testkit/interop"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/twmb/franz-go/pkg/sr"
)

// TestInteropRoundTrip writes records with Confluent's Python serializers
// (produce.py) and reads them back with its deserializers (consume.py),
// read_committed, against the real registry, on kfake and on the broker of
// PROCESSOR_TEST_BROKERS: the values and keys that come out are the ones
// that went in, with the lineage headers among those written, and the
// serializer registered the schema under <topic>-value.
func TestInteropRoundTrip(t *testing.T) {
	interop.Python(t)
	reg := interop.RegistryURL(t)
	cases := []struct {
		format, schema string
		txn            bool
	}{
		{interop.Avro, "order.avsc", true},
		{interop.Protobuf, "order.proto", false},
	}
	cl, err := sr.NewClient(sr.URLs(reg))
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		for _, tc := range cases {
			t.Run(tc.format, func(t *testing.T) {
				topic := kafkatest.Unique("interop-" + tc.format)
				c.CreateTopics(t, 1, nil, topic)
				o := interop.Options{
					Brokers: c.Brokers, Registry: reg, Topic: topic, Format: tc.format,
					SchemaFile: filepath.Join("testdata", tc.schema), Transactional: tc.txn,
				}
				var in []interop.Record
				for i := 1; i <= 5; i++ {
					v := map[string]any{"id": fmt.Sprintf("order-%d", i), "qty": float64(i), "price": 1.5 * float64(i)}
					if tc.format == interop.Protobuf {
						v["tags"] = []any{"t", fmt.Sprint(i)}
					} else {
						v["note"] = nil
					}
					r := interop.Record{Key: fmt.Sprintf("k%d", i), Value: v}
					if i%2 == 0 { // lineage headers on some, and one that consume.py leaves out
						r.Headers = map[string]string{"processor.source.topic": "in", "processor.source.partition": "3",
							"processor.source.offset": fmt.Sprint(100 + i), "other": "x"}
					}
					in = append(in, r)
				}
				abs, err := filepath.Abs(o.SchemaFile)
				if err != nil {
					t.Fatal(err)
				}
				o.SchemaFile = abs
				interop.Produce(t, o, in)
				out := interop.Consume(t, o, len(in))
				ss, err := cl.SchemaByVersion(context.Background(), topic+"-value", -1)
				if err != nil || ss.Type.String() != strings.ToUpper(tc.format) {
					t.Fatalf("the serializer's schema under %s-value: %+v, %v", topic, ss, err)
				}
				if len(out) != len(in) {
					t.Fatalf("read %d records, wrote %d", len(out), len(in))
				}
				for i, rec := range out {
					if rec["key"] != in[i].Key || rec["partition"] != float64(0) {
						t.Errorf("record %d: key %v partition %v, want %s, 0", i, rec["key"], rec["partition"], in[i].Key)
					}
					if !reflect.DeepEqual(rec["value"], in[i].Value) {
						t.Errorf("record %d: value %v, wrote %v", i, rec["value"], in[i].Value)
					}
					want := map[string]any{}
					for k, v := range in[i].Headers {
						if k != "other" {
							want[k] = v
						}
					}
					got, _ := rec["headers"].(map[string]any)
					if got == nil {
						got = map[string]any{}
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("record %d: headers %v, want %v", i, got, want)
					}
				}
			})
		}
	})
}
