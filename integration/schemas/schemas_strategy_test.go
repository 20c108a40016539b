package schemas

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/testkit/interop"
	"github.com/streamproc/processor/schema"
)

// strategyTypes are the two record types of a topic in the strategy
// interop test, in namespace (Avro) or package (Protobuf) ns: their
// record names, and the schema file and message of each.
type strategyTypes struct {
	names   [2]string
	files   [2]string
	message [2]string // Protobuf
	// value is input i's value of type typ (0 or 1) as the serializer
	// takes it; want the output's as the deserializer gives it.
	value, want func(i, typ int) map[string]any
}

// writeStrategyTypes writes the schema files of two record types of
// format into dir: for Avro one .avsc each, for JSON Schema one .json
// each (titled with the type's name), for Protobuf one .proto file
// holding both messages (one subject each under a record strategy, the
// same file).
func writeStrategyTypes(t *testing.T, dir, format, ns string) strategyTypes {
	t.Helper()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	st := strategyTypes{names: [2]string{ns + ".OrderCreated", ns + ".OrderPaid"}}
	st.value = func(i, typ int) map[string]any {
		if typ == 0 {
			return map[string]any{"id": fmt.Sprintf("o-%d", i), "amount_cents": float64(100 * (i + 1))}
		}
		return map[string]any{"id": fmt.Sprintf("o-%d", i), "method": "card"}
	}
	if format == interop.JSONSchema {
		schemaOf := func(title, fields string) string {
			return `{"title":"` + title + `","type":"object","properties":{"id":{"type":"string"},` + fields + `},"required":["id"],"additionalProperties":false}`
		}
		st.files[0] = write("created.json", schemaOf(st.names[0], `"amount_cents":{"type":"integer"}`))
		st.files[1] = write("paid.json", schemaOf(st.names[1], `"method":{"type":"string"}`))
		st.want = func(i, typ int) map[string]any {
			v := st.value(i, typ)
			v["id"] = strings.ToUpper(v["id"].(string))
			return v
		}
		return st
	}
	if format == interop.Avro {
		st.files[0] = write("created.avsc", `{"type":"record","name":"OrderCreated","namespace":"`+ns+`","fields":[
			{"name":"id","type":"string"},{"name":"amount_cents","type":"long"}]}`)
		st.files[1] = write("paid.avsc", `{"type":"record","name":"OrderPaid","namespace":"`+ns+`","fields":[
			{"name":"id","type":"string"},{"name":"method","type":"string"}]}`)
		st.want = func(i, typ int) map[string]any {
			v := st.value(i, typ)
			v["id"] = strings.ToUpper(v["id"].(string))
			return v
		}
		return st
	}
	f := write("orders_"+strings.ReplaceAll(ns, ".", "_")+".proto", "syntax = \"proto3\";\npackage "+ns+";\n"+
		"message OrderCreated { string id = 1; int64 amount_cents = 2; }\n"+
		"message OrderPaid { string id = 1; string method = 2; }\n")
	st.files = [2]string{f, f}
	st.message = st.names
	st.want = func(i, typ int) map[string]any {
		v := st.value(i, typ)
		v["id"] = strings.ToUpper(v["id"].(string))
		if typ == 0 {
			v["amount_cents"] = fmt.Sprint(100 * (i + 1)) // protojson's int64
		}
		return v
	}
	return st
}

// Subject name strategies with Confluent's own serdes: Confluent's Python
// AvroSerializer, ProtobufSerializer and JSONSerializer, configured with
// record_subject_name_strategy or topic_record_subject_name_strategy,
// write two record types to one topic, interleaved; the processor, with
// PROCESSOR_VALUE_SUBJECT_STRATEGY the same, decodes each by its schema
// id, upper-cases its id with jq, and encodes it under the subject its
// type maps to on the output topic; Confluent's deserializer, with the
// same strategy, reads every output as its own type, in order, with the
// id of the latest version of that subject. Under topic_record the output
// subjects are registered beforehand as an operator would (the Avro
// OrderCreated one evolved, a field with a default added, which the
// outputs then carry). The registry has the subjects the strategy names,
// and no <topic>-value. Needs PROCESSOR_TEST_PYTHON and
// PROCESSOR_TEST_SCHEMA_REGISTRY_URL (skipped without them, failed in CI).
func TestSchemaInteropSubjectStrategies(t *testing.T) {
	t.Parallel()
	interop.Python(t)
	url := interop.RegistryURL(t)
	r := &itest.SREnv{Name: "registry", URL: url, Reg: newSRClient(t, url)}
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		for _, format := range []string{interop.Avro, interop.Protobuf, interop.JSONSchema} {
			for _, strategy := range []string{interop.StrategyRecord, interop.StrategyTopicRecord} {
				t.Run(format+"/"+strategy, func(t *testing.T) {
					runStrategyInterop(t, tg, r, format, strategy)
				})
			}
		}
	})
}

func runStrategyInterop(t *testing.T, tg *itest.Target, r *itest.SREnv, format, strategy string) {
	const n = 12
	f := schema.Format(format)
	st := schema.SubjectStrategy(strategy)
	ns := "interop." + strings.ReplaceAll(itest.Unique("s"), "-", "")
	types := writeStrategyTypes(t, t.TempDir(), format, ns)
	in, out, group := itest.Unique("sr-strategy-in"), itest.Unique("sr-strategy-out"), itest.Unique("sr-strategy-group")
	tg.NewTopics(t, 1, in, out)
	typeOf := func(i int) int { return min(i%3, 1) } // 0, 1, 1, 0, 1, 1, ...
	var recs []interop.Record
	for i := range n {
		typ := typeOf(i)
		recs = append(recs, interop.Record{Key: fmt.Sprintf("k%d", i), Value: types.value(i, typ),
			SchemaFile: types.files[typ], Message: types.message[typ]})
	}
	opts := interop.Options{Brokers: tg.Brokers, Registry: r.URL, Topic: in, Format: format, Strategy: strategy, Timeout: 90 * time.Second}
	if f == schema.Protobuf {
		opts.ProtoForm = interop.ProtoDescriptor // as the serializer registers it itself
	}
	interop.Produce(t, opts, recs)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	evolved := st == schema.TopicRecordStrategy && f == schema.Avro
	if st == schema.TopicRecordStrategy {
		// The output subjects, registered as an operator would: the
		// input's schema (its Avro OrderCreated with a field added).
		for typ, name := range types.names {
			s, err := r.Reg.Latest(ctx, st.Subject(in, "-value", name))
			if err != nil {
				t.Fatalf("the serializer's subject of %s: %v", name, err)
			}
			if typ == 0 && evolved {
				text := strings.Replace(s.Schema.Text, `"fields":[`, `"fields":[{"name":"channel","type":"string","default":"web"},`, 1)
				if text == s.Schema.Text {
					t.Fatalf("the registry's text of %s has no \"fields\":[ to add a field to: %s", name, text)
				}
				s.Schema.Text = text
			}
			if _, err := r.Reg.Register(ctx, st.Subject(out, "-value", name), s.Schema); err != nil {
				t.Fatal(err)
			}
		}
	}

	cancel()

	inst := tg.SchemaInstance(r, group, in, out, f, ".id |= ascii_upcase")
	inst.Extra = append(inst.Extra, "PROCESSOR_VALUE_SUBJECT_STRATEGY="+strategy)
	p := itest.RunBinary(t, group, inst)
	tg.WaitCaughtUpWithin(t, 90*time.Second, group, in)
	p.Terminate(t)

	opts.Topic = out
	if f == schema.Protobuf {
		opts.SchemaFile, opts.Message = types.files[0], strings.Join(types.names[:], ",")
	}
	got := interop.Consume(t, opts, n)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, rec := range got {
		typ := typeOf(i)
		subject := st.Subject(out, "-value", types.names[typ])
		latest, err := r.Reg.Latest(ctx, subject)
		if err != nil {
			t.Fatalf("output subject %s: %v", subject, err)
		}
		want := types.want(i, typ)
		if typ == 0 && evolved {
			want["channel"] = "web"
		}
		if rec["type"] != types.names[typ] || rec["subject"] != subject || rec["schema_id"] != float64(latest.ID) {
			t.Errorf("output %d: type %v subject %v schema id %v; want %s under %s, id %d (its latest)", i, rec["type"], rec["subject"], rec["schema_id"],
				types.names[typ], subject, latest.ID)
		}
		if rec["key"] != recs[i].Key || !reflect.DeepEqual(rec["value"], want) {
			t.Errorf("output %d: key %v value %v, want %s %v", i, rec["key"], rec["value"], recs[i].Key, want)
		}
	}

	subjects := registrySubjects(t, r.URL)
	for _, name := range types.names {
		for _, topic := range []string{in, out} {
			if s := st.Subject(topic, "-value", name); !slices.Contains(subjects, s) {
				t.Errorf("the registry has no subject %s (of %s on %s)", s, name, topic)
			}
		}
	}
	for _, topic := range []string{in, out} {
		if slices.Contains(subjects, topic+"-value") {
			t.Errorf("the registry has %s-value: something used the topic strategy", topic)
		}
	}
}

// registrySubjects lists the subjects of the registry at url.
func registrySubjects(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(url, "/") + "/subjects")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var subjects []string
	if err := json.NewDecoder(resp.Body).Decode(&subjects); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("listing the registry's subjects: HTTP %d, %v", resp.StatusCode, err)
	}
	return subjects
}
