package codec_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/codec"
	"github.com/streamproc/processor/schema/schematest"
	"github.com/streamproc/processor/transform"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"string"},{"name":"amount_cents","type":"long"}]}`

// orderV2 adds a field with a default: BACKWARD compatible with v1.
const orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"string"},{"name":"amount_cents","type":"long"},
	{"name":"channel","type":"string","default":"web"}]}`

var names = codec.Names{Registry: "PROCESSOR_SCHEMA_REGISTRY_URL=http://r:8081", Credentials: "PROCESSOR_SCHEMA_REGISTRY_USERNAME and _PASSWORD"}

// fixture is a registry with orders-value (v1) as the input subject and
// out-value (v2) as the output's, and an input record encoded with v1.
type fixture struct {
	reg   *schematest.Memory
	in    schema.Subject
	wire  []byte // {"id":"o-1","amount_cents":250} in v1's wire format
	value codec.Side
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reg := schematest.NewMemory()
	in := reg.MustRegister("orders-value", schema.Schema{Type: schema.Avro, Text: orderV1})
	reg.MustRegister("out-value", schema.Schema{Type: schema.Avro, Text: orderV2})
	enc, err := schema.NewEncoder(context.Background(), reg, in, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wire, err := enc.Encode(nil, []byte(`{"id":"o-1","amount_cents":250}`))
	if err != nil {
		t.Fatal(err)
	}
	encs := codec.NewEncoders(codec.EncodersOptions{Registry: reg, Format: schema.Avro, Suffix: "-value", DefaultTopic: "out",
		SubjectSetting: "PROCESSOR_OUTPUT_VALUE_SUBJECT", SchemaSetting: "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE"})
	if err := encs.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return &fixture{reg: reg, in: in, wire: wire, value: codec.Side{In: schema.Avro, Out: schema.Avro,
		Decoder: schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{}), Encoders: encs}}
}

// chain builds a chain of one jq-like stage (f, touching the value)
// framed as Plan says.
func (fx *fixture) chain(t *testing.T, touches transform.Parts, f transform.Func) *transform.Chain {
	t.Helper()
	r := &transform.Registry{}
	r.Register("t", transform.Plain("test", func() (transform.Transform, error) { return touching{f, touches}, nil }))
	c, err := r.Build([]transform.Entry{{Name: "t"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, last := codec.Plan(c.Touches(), codec.Side{In: schema.Raw, Out: schema.Raw}, fx.value, names)
	c.Frame(first, last)
	return c
}

type touching struct {
	transform.Func
	parts transform.Parts
}

func (t touching) Touches() transform.Parts { return t.parts }

// decodeOut decodes an output's value with the registry.
func (fx *fixture) decodeOut(t *testing.T, b []byte) (map[string]any, int) {
	t.Helper()
	js, err := schema.NewDecoder(fx.reg, schema.Avro, schema.DecoderOptions{}).Decode(context.Background(), b, nil)
	if err != nil {
		t.Fatalf("decoding the output: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	return m, int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4])
}

// A chain that reads the value sees JSON, and its JSON output is encoded
// with the output subject's latest schema (an evolved one: the new field
// takes its default).
func TestDecodeTransformEncode(t *testing.T) {
	fx := newFixture(t)
	var seen string
	c := fx.chain(t, transform.PartValue, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		seen = string(r.Value)
		r.Value = []byte(strings.Replace(string(r.Value), "250", "500", 1))
		return append(out, r), nil
	})
	in := &kgo.Record{Key: []byte("k"), Value: fx.wire}
	out, err := c.Process(context.Background(), record.Source{}, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if seen != `{"id":"o-1","amount_cents":250}` {
		t.Errorf("the chain saw %s, want the value as plain JSON", seen)
	}
	m, id := fx.decodeOut(t, out[0].Value)
	latest, _ := fx.reg.Latest(context.Background(), "out-value")
	if id != latest.ID || m["amount_cents"] != float64(500) || m["channel"] != "web" {
		t.Errorf("output %v with schema id %d; want amount 500, channel web (the default), id %d", m, id, latest.ID)
	}
	if string(out[0].Key) != "k" {
		t.Errorf("key %q: raw keys pass through", out[0].Key)
	}
}

// A chain that touches no value gets no stages at all: the bytes pass
// through untouched and the registry is never asked.
func TestPassThroughWhenValueUntouched(t *testing.T) {
	fx := newFixture(t)
	calls := fx.reg.Calls("SchemaByID")
	c := fx.chain(t, 0, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	})
	if c.Len() != 1 {
		t.Fatalf("chain has %d stages, want only the entry", c.Len())
	}
	out, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: fx.wire}, nil)
	if err != nil || string(out[0].Value) != string(fx.wire) {
		t.Fatalf("Process = %q, %v; want the input bytes", out[0].Value, err)
	}
	if got := fx.reg.Calls("SchemaByID"); got != calls {
		t.Errorf("the registry was asked %d times for a chain that never reads values", got-calls)
	}
	// A different output format needs both stages even then.
	first, last := codec.Plan(0, codec.Side{In: schema.Raw, Out: schema.Raw}, codec.Side{In: schema.Avro, Out: schema.Raw, Decoder: fx.value.Decoder}, names)
	if len(first) != 1 || len(last) != 0 {
		t.Errorf("avro in, raw out: %d decode and %d encode stages, want 1 and 0", len(first), len(last))
	}
}

// Tombstones stay tombstones: a null value is neither decoded nor
// encoded.
func TestTombstonesPassThrough(t *testing.T) {
	fx := newFixture(t)
	c := fx.chain(t, transform.PartValue, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	})
	out, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Key: []byte("k"), Value: nil}, nil)
	if err != nil || out[0].Value != nil {
		t.Fatalf("Process(tombstone) = %q, %v; want a null value", out[0].Value, err)
	}
}

// Each failure by whose fault it is: the record's are plain errors for
// the policy (naming the part), the registry's transform.Unavailable,
// refused credentials transform.Fatal.
func TestFailuresByFault(t *testing.T) {
	fx := newFixture(t)
	id := func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	}
	c := fx.chain(t, transform.PartValue, id)
	run := func(v []byte) error {
		_, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: v}, nil)
		return err
	}
	for name, v := range map[string][]byte{"no magic byte": []byte(`{"id":"x"}`), "unknown schema id": {0, 0, 0, 0x30, 0x39, 2}, "truncated": fx.wire[:7]} {
		err := run(v)
		var te *transform.Error
		if err == nil || transform.IsUnavailable(err) || transform.IsFatal(err) || !errors.As(err, &te) || te.Stage != codec.DecodeStage || !strings.Contains(err.Error(), "value") {
			t.Errorf("%s: %v; want the record's own failure in stage decode", name, err)
		}
	}
	// An output that does not fit the output schema is the record's too.
	bad := fx.chain(t, transform.PartValue, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		r.Value = []byte(`{"id":"o-1","amount_cents":2.5}`)
		return append(out, r), nil
	})
	_, err := bad.Process(context.Background(), record.Source{}, &kgo.Record{Value: fx.wire}, nil)
	var te *transform.Error
	if !errors.As(err, &te) || te.Stage != codec.EncodeStage || transform.IsUnavailable(err) || !strings.Contains(err.Error(), "amount_cents") {
		t.Errorf("an output that does not fit: %v; want the record's failure in stage encode naming the field", err)
	}

	fresh := newFixture(t) // nothing cached: every record asks the registry
	c = fresh.chain(t, transform.PartValue, id)
	fresh.reg.Fail(schema.FaultRegistry)
	if _, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: fresh.wire}, nil); !transform.IsUnavailable(err) ||
		!strings.Contains(err.Error(), "PROCESSOR_SCHEMA_REGISTRY_URL") {
		t.Errorf("registry down: %v; want transform.Unavailable naming PROCESSOR_SCHEMA_REGISTRY_URL", err)
	}
	fresh.reg.Fail(schema.FaultCredentials)
	if _, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: fresh.wire}, nil); !transform.IsFatal(err) ||
		!strings.Contains(err.Error(), "PROCESSOR_SCHEMA_REGISTRY_USERNAME") {
		t.Errorf("credentials refused: %v; want transform.Fatal naming the credentials' settings", err)
	}
}

// Routed outputs use their topic's subject; a topic without one fails
// the record (and is not asked about again within a while); the default
// topic's schema follows the subject's new versions on Refresh.
func TestEncodersPerTopicAndRefresh(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	fx.reg.MustRegister("eu-value", schema.Schema{Type: schema.Avro, Text: orderV1})
	encs := fx.value.Encoders
	b, err := encs.Encode(ctx, "eu", "", []byte(`{"id":"a","amount_cents":1}`))
	if err != nil {
		t.Fatal(err)
	}
	eu, _ := fx.reg.Latest(ctx, "eu-value")
	if _, id := fx.decodeOut(t, b); id != eu.ID {
		t.Errorf("routed to eu: schema id %d, want eu-value's %d", id, eu.ID)
	}
	before := fx.reg.Calls("Latest")
	for range 3 {
		if _, err := encs.Encode(ctx, "nowhere", "", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), `"nowhere-value"`) || transform.IsUnavailable(err) {
			t.Fatalf("a topic without a subject: %v", err)
		}
	}
	if n := fx.reg.Calls("Latest") - before; n != 1 {
		t.Errorf("a topic without a subject was looked up %d times for 3 records, want once", n)
	}
	v3 := fx.reg.MustRegister("out-value", schema.Schema{Type: schema.Avro, Text: strings.Replace(orderV2, `"default":"web"}`, `"default":"web"},{"name":"gift","type":"boolean","default":false}`, 1)})
	if err := encs.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := encs.Subjects()[codec.Target{Topic: "out"}].ID; got != v3.ID {
		t.Errorf("after Refresh the output topic encodes with schema id %d, want the new version's %d", got, v3.ID)
	}
}

// A schema file is registered at Start and used as it is; one the
// registry refuses fails Start with FaultSchema, naming the setting.
func TestEncodersSchemaFile(t *testing.T) {
	ctx := context.Background()
	reg := schematest.NewMemory()
	s := &schema.Schema{Type: schema.Avro, Text: orderV2}
	encs := codec.NewEncoders(codec.EncodersOptions{Registry: reg, Format: schema.Avro, Suffix: "-value", DefaultTopic: "out", Schema: s,
		SubjectSetting: "PROCESSOR_OUTPUT_VALUE_SUBJECT", SchemaSetting: "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE"})
	if err := encs.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := reg.Latest(ctx, "out-value"); err != nil || got.ID != encs.Subjects()[codec.Target{Topic: "out"}].ID {
		t.Errorf("the schema file was not registered under out-value: %v, %v", got, err)
	}
	wrong := codec.NewEncoders(codec.EncodersOptions{Registry: reg, Format: schema.Protobuf, Suffix: "-value", DefaultTopic: "out",
		SubjectSetting: "PROCESSOR_OUTPUT_VALUE_SUBJECT"})
	if err := wrong.Start(ctx, nil); schema.FaultOf(err) != schema.FaultSchema || !strings.Contains(err.Error(), "PROCESSOR_OUTPUT_VALUE_SUBJECT") {
		t.Errorf("an Avro subject for protobuf outputs: %v; want FaultSchema naming the setting", err)
	}
	reg.Fail(schema.FaultSchema)
	if err := codec.NewEncoders(codec.EncodersOptions{Registry: reg, Format: schema.Avro, Suffix: "-value", DefaultTopic: "x", Schema: s,
		SchemaSetting: "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE"}).Start(ctx, nil); schema.FaultOf(err) != schema.FaultSchema ||
		!strings.Contains(err.Error(), "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE") {
		t.Errorf("a refused schema file: %v; want FaultSchema naming the setting", err)
	}
}

// A registry whose answers make no sense to a decode (FaultSchema, e.g. a
// URL that is not the registry's API) fails no record: it is the
// registry's failure.
func TestDecodeSchemaFaultIsTheRegistrys(t *testing.T) {
	fx := newFixture(t)
	c := fx.chain(t, transform.PartValue, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	})
	fx.reg.Fail(schema.FaultSchema)
	_, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: fx.wire}, nil)
	if !transform.IsUnavailable(err) {
		t.Errorf("a FaultSchema while decoding: %v; want transform.Unavailable", err)
	}
}
