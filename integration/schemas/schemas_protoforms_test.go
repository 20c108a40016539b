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

	"github.com/streamproc/processor/internal/testkit/interop"
	"github.com/streamproc/processor/schema"
)

// descUserProto is the file the event imports besides the well-known
// types; %s is its package, unique per run, so that its subject (named
// by its import path, as Confluent's serializer names it) is the run's.
const descUserProto = `syntax = "proto3";
package %s;
message Customer { string name = 1; uint64 big = 2; }
enum Tier { TIER_UNSPECIFIED = 0; SILVER = 1; GOLD = 2; }
`

// descEventProto is the event: a nested message (message indexes [0, 0]),
// the well-known Timestamp and Int64Value, a message and an enum of the
// imported file, a map, a oneof and 64-bit integers. %[1]s is the
// imported file's name, %[2]s its package.
const descEventProto = `syntax = "proto3";
package interop.desc;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "%[1]s";
message Envelope {
  message Event {
    string id = 1;
    google.protobuf.Timestamp at = 2;
    google.protobuf.Int64Value maybe = 3;
    %[2]s.Customer customer = 4;
    %[2]s.Tier tier = 5;
    map<string, int64> counts = 6;
    oneof payload { string text = 7; int64 n = 8; }
    int64 big = 9;
    uint64 ubig = 10;
  }
  string unused = 1;
}
`

// descEvent is event i in the JSON form both json_format and protojson
// read, the form Confluent's deserializer prints it back in
// (preserving_proto_field_name): 64-bit integers as strings, at and
// beyond 2^53 and at their limits.
func descEvent(i int) map[string]any {
	v := map[string]any{
		"id":       fmt.Sprintf("ev-%d", i),
		"at":       fmt.Sprintf("2024-01-02T03:04:%02d.123456789Z", i),
		"maybe":    fmt.Sprint(int64(1)<<53 + int64(i)),
		"customer": map[string]any{"name": fmt.Sprintf("c-%d", i), "big": fmt.Sprint(uint64(1)<<63 + uint64(i))},
		"tier":     []string{"SILVER", "GOLD"}[i%2],
		"counts":   map[string]any{"a": "9007199254740993", "b": fmt.Sprint(-9223372036854775808 + int64(i))},
		"big":      fmt.Sprint(9223372036854775807 - int64(i)),
		"ubig":     "18446744073709551615",
	}
	if i%2 == 0 {
		v["text"] = fmt.Sprintf("t-%d", i)
	} else {
		v["n"] = fmt.Sprint(-(int64(1)<<53 + 1))
	}
	return v
}

// Protobuf in both forms a registry holds it, from and to Confluent's
// clients: Python's ProtobufSerializer registers the event's schema and
// its user import on Apicurio Registry, as it does itself (descriptor:
// base64 FileDescriptorProtos) or as .proto text (text), the import a
// subject of its own, referenced, the well-known types left to the
// reader; it writes the events; the processor decodes them, appends to
// the id with jq and encodes the outputs with that same subject
// (PROCESSOR_OUTPUT_VALUE_SUBJECT, so a subject in the descriptor form is
// the output's too, which used to stop the processor at start), the
// nested message's indexes [0, 0] in every header; Confluent's
// ProtobufDeserializer reads every output back as its input with the new
// id: timestamps, wrappers, the imported message and enum, maps, oneofs,
// 64-bit integers at and beyond 2^53 all exact. The schema package reads
// the outputs the same. On kfake and Apache Kafka; needs
// PROCESSOR_TEST_PYTHON and PROCESSOR_TEST_SCHEMA_REGISTRY_URL.
func TestSchemaInteropProtobufForms(t *testing.T) {
	t.Parallel()
	interop.Python(t)
	reg := interop.RegistryURL(t)
	r := &itest.SREnv{Name: "registry", URL: reg, Reg: newSRClient(t, reg)}
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		for _, form := range []string{interop.ProtoDescriptor, interop.ProtoText} {
			t.Run(form, func(t *testing.T) { protoFormsRoundTrip(t, tg, r, form) })
		}
	})
}

// protoFormsRoundTrip is TestSchemaInteropProtobufForms with the
// schemas registered in form (interop.ProtoDescriptor or ProtoText).
func protoFormsRoundTrip(t *testing.T, tg *itest.Target, r *itest.SREnv, form string) {
	const n = 12
	dir := t.TempDir()
	pkg := strings.ReplaceAll(itest.Unique("interop.user"), "-", "_")
	userFile := pkg + ".proto"
	writeFile(t, filepath.Join(dir, userFile), fmt.Sprintf(descUserProto, pkg))
	eventFile := filepath.Join(dir, "event.proto")
	writeFile(t, eventFile, fmt.Sprintf(descEventProto, userFile, pkg))
	in, out, group := itest.Unique("sr-protodesc-in"), itest.Unique("sr-protodesc-out"), itest.Unique("sr-protodesc-group")
	tg.NewTopics(t, 1, in, out)
	opts := interop.Options{Brokers: tg.Brokers, Registry: r.URL, Topic: in, Format: interop.Protobuf, SchemaFile: eventFile,
		Message: "interop.desc.Envelope.Event", ProtoForm: form, Timeout: 90 * time.Second}
	var recs []interop.Record
	for i := 1; i <= n; i++ {
		recs = append(recs, interop.Record{Key: fmt.Sprintf("k%d", i), Value: descEvent(i)})
	}
	interop.Produce(t, opts, recs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inSubj, err := r.Reg.Latest(ctx, in+"-value")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(inSubj.Schema.Text, "syntax") != (form == interop.ProtoText) || len(inSubj.Schema.References) != 1 || inSubj.Schema.References[0].Name != userFile {
		t.Fatalf("registered %.60q with references %v; want the %s form referencing %s", inSubj.Schema.Text, inSubj.Schema.References, form, userFile)
	}

	inst := tg.SchemaInstance(r, group, in, out, schema.Protobuf, `.id += "-out"`)
	inst.Extra = append(inst.Extra, "PROCESSOR_OUTPUT_VALUE_SUBJECT="+in+"-value", "PROCESSOR_OUTPUT_VALUE_MESSAGE=interop.desc.Envelope.Event")
	p := itest.RunBinary(t, group, inst)
	tg.WaitCaughtUpWithin(t, 90*time.Second, group, in)
	p.Terminate(t)

	want := func(i int) map[string]any {
		v := descEvent(i)
		v["id"] = v["id"].(string) + "-out"
		return v
	}
	outs := tg.ReadAll(t, out, true)
	if len(outs) != n {
		t.Fatalf("%d outputs, want %d", len(outs), n)
	}
	// A fresh bound for the reads: the processor's run (the binary built
	// on first use) may have outlasted the first.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dec := schema.NewDecoder(r.Reg, schema.Protobuf, schema.DecoderOptions{})
	for i, o := range outs {
		if wireID(o.Value) != inSubj.ID || len(o.Value) < 8 || !bytes.Equal(o.Value[5:8], []byte{4, 0, 0}) {
			t.Errorf("output %d: header %x, want schema id %d and the message indexes [0, 0] (04 00 00)", i, o.Value[:min(len(o.Value), 8)], inSubj.ID)
		}
		js, err := dec.Decode(ctx, o.Value, nil)
		var got map[string]any
		if err == nil {
			err = json.Unmarshal(js, &got)
		}
		if err != nil || got["id"] != want(i + 1)["id"] || got["ubig"] != "18446744073709551615" {
			t.Errorf("output %d decodes as %s (%v); want id %v and ubig 18446744073709551615", i, js, err, want(i + 1)["id"])
		}
	}
	opts.Topic = out
	for i, rec := range interop.Consume(t, opts, n) {
		if rec["key"] != fmt.Sprintf("k%d", i+1) || !reflect.DeepEqual(rec["value"], want(i+1)) {
			t.Errorf("Confluent's deserializer read output %d as key %v value %v, want k%d %v", i, rec["key"], rec["value"], i+1, want(i+1))
		}
	}
}

// writeFile writes text to path or fails the test.
func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
