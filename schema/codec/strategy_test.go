package codec_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/codec"
	"github.com/streamproc/processor/schema/schematest"
	"github.com/streamproc/processor/transform"
)

// twoTypes is one format's pair of record types, as a topic carrying
// both has them: each type's schema (for Protobuf one file holding both
// messages, as a serializer registers it under either subject) and a
// value of it; names are the types' record names.
type twoTypes struct {
	format        schema.Format
	names         [2]string
	schemas       [2]string
	values        [2]string
	message       [2]string // Protobuf: the message a value is
	missingSchema string    // a third type with no output subject
	missingName   string
	missingValue  string
}

var formatsTwoTypes = []twoTypes{
	{
		format: schema.Avro, names: [2]string{"shop.OrderCreated", "shop.payments.OrderPaid"},
		schemas: [2]string{
			`{"type":"record","name":"OrderCreated","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount_cents","type":"long"}]}`,
			`{"type":"record","name":"shop.payments.OrderPaid","namespace":"ignored","fields":[{"name":"id","type":"string"},{"name":"method","type":"string"}]}`},
		values:        [2]string{`{"id":"o-1","amount_cents":250}`, `{"id":"o-1","method":"card"}`},
		missingSchema: `{"type":"record","name":"OrderShipped","namespace":"shop","fields":[{"name":"id","type":"string"}]}`,
		missingName:   "shop.OrderShipped", missingValue: `{"id":"o-1"}`,
	},
	{
		format: schema.Protobuf, names: [2]string{"shop.OrderCreated", "shop.Order.Paid"},
		schemas:       [2]string{protoShop, protoShop},
		values:        [2]string{`{"id":"o-1","amountCents":"250"}`, `{"id":"o-1","method":"card"}`},
		message:       [2]string{"shop.OrderCreated", "shop.Order.Paid"},
		missingSchema: "syntax = \"proto3\";\npackage shop;\nmessage OrderShipped { string id = 1; }\n",
		missingName:   "shop.OrderShipped", missingValue: `{"id":"o-1"}`,
	},
	{
		format: schema.JSONSchema, names: [2]string{"OrderCreated", "OrderPaid"},
		schemas: [2]string{
			`{"title":"OrderCreated","type":"object","properties":{"id":{"type":"string"},"amount_cents":{"type":"integer"}},"required":["id","amount_cents"]}`,
			`{"title":"OrderPaid","type":"object","properties":{"id":{"type":"string"},"method":{"type":"string"}},"required":["id","method"]}`},
		values:        [2]string{`{"id":"o-1","amount_cents":250}`, `{"id":"o-1","method":"card"}`},
		missingSchema: `{"title":"OrderShipped","type":"object"}`,
		missingName:   "OrderShipped", missingValue: `{"id":"o-1"}`,
	},
}

// protoShop holds two message types, the second nested (message indexes
// [1, 0]).
const protoShop = "syntax = \"proto3\";\npackage shop;\n" +
	"message OrderCreated { string id = 1; int64 amount_cents = 2; }\n" +
	"message Order { message Paid { string id = 1; string method = 2; } }\n"

// strategyFixture is a registry with both types registered under the
// input topic "in" as Confluent's serializers register them under the
// strategy, and under the output subjects of topics "out" and "routed"
// (a second version of the first type there, so that the output is
// seen to use the output subject's latest), and a chain encoding with
// the strategy.
type strategyFixture struct {
	reg      *schematest.Memory
	tt       twoTypes
	strategy schema.SubjectStrategy
	wire     [2][]byte
	side     codec.Side
}

func newStrategyFixture(t testing.TB, tt twoTypes, strategy schema.SubjectStrategy) *strategyFixture {
	t.Helper()
	ctx := context.Background()
	fx := &strategyFixture{reg: schematest.NewMemory(), tt: tt, strategy: strategy}
	for i := range 2 {
		s := schema.Schema{Type: tt.format, Text: tt.schemas[i]}
		in := fx.reg.MustRegister(strategy.Subject("in", "-value", tt.names[i]), s)
		enc, err := schema.NewEncoder(ctx, fx.reg, in, schema.EncoderOptions{Message: tt.message[i]})
		if err != nil {
			t.Fatal(err)
		}
		if fx.wire[i], err = enc.Encode(nil, []byte(tt.values[i])); err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{"out", "routed"} {
			fx.reg.MustRegister(strategy.Subject(topic, "-value", tt.names[i]), s)
		}
	}
	if strategy == schema.TopicRecordStrategy {
		// The output subject of the first type moves on to a version of
		// its own (the same schema, spaced differently: another id).
		fx.reg.MustRegister(strategy.Subject("out", "-value", tt.names[0]), schema.Schema{Type: tt.format, Text: tt.schemas[0] + "\n"})
	}
	encs := codec.NewEncoders(codec.EncodersOptions{Registry: fx.reg, Format: tt.format, Suffix: "-value", DefaultTopic: "out",
		Strategy: strategy, StrategySettingName: "PROCESSOR_VALUE_SUBJECT_STRATEGY"})
	if err := encs.Start(ctx, []string{"routed"}); err != nil {
		t.Fatal(err)
	}
	fx.side = codec.Side{In: tt.format, Out: tt.format, Decoder: schema.NewDecoder(fx.reg, tt.format, schema.DecoderOptions{}), Encoders: encs}
	return fx
}

// chain is a chain of f (touching values) framed by its own Plan.
func (fx *strategyFixture) chain(t testing.TB, f transform.Func) *transform.Chain {
	t.Helper()
	r := &transform.Registry{}
	r.Register("t", transform.Plain("test", func() (transform.Transform, error) { return touching{f, transform.PartValue}, nil }))
	c, err := r.Build([]transform.Entry{{Name: "t"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, last := codec.Plan(c.Touches(), codec.Side{In: schema.Raw, Out: schema.Raw}, fx.side, names)
	c.Frame(first, last)
	return c
}

// check decodes an output written to topic from an input of type i: it
// must carry the id of the latest version of the subject the strategy
// names for topic and type i, and decode to the input's value as that
// type.
func (fx *strategyFixture) check(t *testing.T, out *kgo.Record, topic string, i int) {
	t.Helper()
	ctx := context.Background()
	subject := fx.strategy.Subject(topic, "-value", fx.tt.names[i])
	latest, err := fx.reg.Latest(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if id := int(binary.BigEndian.Uint32(out.Value[1:5])); id != latest.ID {
		t.Errorf("output of type %s to %s: schema id %d, want %d (the latest of subject %q)", fx.tt.names[i], topic, id, latest.ID, subject)
	}
	js, name, err := schema.NewDecoder(fx.reg, fx.tt.format, schema.DecoderOptions{}).DecodeNamed(ctx, out.Value, nil)
	if err != nil {
		t.Fatalf("decoding the output: %v", err)
	}
	var got, want any
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(fx.tt.values[i]), &want); err != nil {
		t.Fatal(err)
	}
	if name != fx.tt.names[i] || !reflect.DeepEqual(got, want) {
		t.Errorf("output decodes as %s %s, want %s %s", name, js, fx.tt.names[i], fx.tt.values[i])
	}
}

// A topic carrying two record types: every record is decoded by its own
// schema id, and each output, to the default topic or routed, fanned out
// as new records or not, is encoded under the subject that its input's
// record type maps to on its topic under the strategy, for every format
// and both record strategies.
func TestRecordStrategiesTwoTypes(t *testing.T) {
	for _, tt := range formatsTwoTypes {
		for _, strategy := range []schema.SubjectStrategy{schema.RecordStrategy, schema.TopicRecordStrategy} {
			t.Run(string(tt.format)+"/"+string(strategy), func(t *testing.T) {
				fx := newStrategyFixture(t, tt, strategy)
				// Each input goes to the default topic as it is and, as a
				// new record, to the routed topic.
				c := fx.chain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
					return append(out, r, &kgo.Record{Topic: "routed", Value: r.Value}), nil
				})
				for n, i := range []int{0, 1, 1, 0, 1} {
					in := &kgo.Record{Value: fx.wire[i]}
					out, err := c.Process(context.Background(), record.Source{Offset: int64(n)}, in, nil)
					if err != nil {
						t.Fatalf("input %d (%s): %v", n, tt.names[i], err)
					}
					if len(out) != 2 {
						t.Fatalf("input %d: %d outputs, want 2", n, len(out))
					}
					fx.check(t, out[0], "out", i)
					fx.check(t, out[1], "routed", i)
				}
			})
		}
	}
}

// A record type whose output subject the registry does not have fails
// that record (a record fault naming the subject) and no other; the
// registry is not asked again for it within the retry interval.
func TestRecordStrategyMissingSubject(t *testing.T) {
	for _, tt := range formatsTwoTypes {
		t.Run(string(tt.format), func(t *testing.T) {
			fx := newStrategyFixture(t, tt, schema.TopicRecordStrategy)
			in := fx.reg.MustRegister(schema.TopicRecordStrategy.Subject("in", "-value", tt.missingName), schema.Schema{Type: tt.format, Text: tt.missingSchema})
			enc, err := schema.NewEncoder(context.Background(), fx.reg, in, schema.EncoderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wire, err := enc.Encode(nil, []byte(tt.missingValue))
			if err != nil {
				t.Fatal(err)
			}
			c := fx.chain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
				return append(out, r), nil
			})
			want := `"out-` + tt.missingName + `"`
			for range 2 {
				_, err = c.Process(context.Background(), record.Source{}, &kgo.Record{Value: wire}, nil)
				if err == nil || !strings.Contains(err.Error(), want) || transform.IsUnavailable(err) {
					t.Fatalf("Process = %v, want a record failure naming subject %s", err, want)
				}
			}
			if n := fx.reg.Calls("Latest"); n != 1 {
				t.Errorf("the registry was asked %d times for the missing subject's latest, want once", n)
			}
			out, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: fx.wire[1]}, nil)
			if err != nil {
				t.Fatal(err)
			}
			fx.check(t, out[0], "out", 1)
		})
	}
}

// An Avro input whose schema has no record name (a union) cannot be
// named a subject under a record strategy: the record fails, naming the
// setting.
func TestRecordStrategyUnnamedInput(t *testing.T) {
	fx := newStrategyFixture(t, formatsTwoTypes[0], schema.RecordStrategy)
	in := fx.reg.MustRegister("some-union", schema.Schema{Type: schema.Avro, Text: `["null","string"]`})
	enc, err := schema.NewEncoder(context.Background(), fx.reg, in, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wire, err := enc.Encode(nil, []byte(`"x"`))
	if err != nil {
		t.Fatal(err)
	}
	c := fx.chain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	})
	_, err = c.Process(context.Background(), record.Source{}, &kgo.Record{Value: wire}, nil)
	if err == nil || !strings.Contains(err.Error(), "PROCESSOR_VALUE_SUBJECT_STRATEGY=record") || !strings.Contains(err.Error(), "no record name") {
		t.Fatalf("Process = %v, want a record failure saying the input has no record name for the strategy", err)
	}
}

// With a schema file, the file's record name is every output's type:
// Start registers it under the subject the strategy names for it on the
// default topic (for Protobuf the configured message's), and the
// outputs of inputs of either type are encoded with it.
func TestRecordStrategySchemaFile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		strategy      schema.SubjectStrategy
		format        schema.Format
		text, message string
		subject       string
		value         string
	}{
		{schema.TopicRecordStrategy, schema.Avro, `{"type":"record","name":"Enriched","namespace":"shop","fields":[{"name":"id","type":"string"}]}`, "", "out-shop.Enriched", `{"id":"o-1"}`},
		{schema.RecordStrategy, schema.Avro, `{"type":"record","name":"Enriched","namespace":"shop","fields":[{"name":"id","type":"string"}]}`, "", "shop.Enriched", `{"id":"o-1"}`},
		{schema.TopicRecordStrategy, schema.Protobuf, protoShop, "shop.Order.Paid", "out-shop.Order.Paid", `{"id":"o-1","method":"card"}`},
		{schema.RecordStrategy, schema.JSONSchema, `{"title":"Enriched","type":"object"}`, "", "Enriched", `{"id":"o-1"}`},
	} {
		t.Run(string(tc.format)+"/"+string(tc.strategy), func(t *testing.T) {
			reg := schematest.NewMemory()
			encs := codec.NewEncoders(codec.EncodersOptions{Registry: reg, Format: tc.format, Suffix: "-value", DefaultTopic: "out",
				Strategy: tc.strategy, Schema: &schema.Schema{Type: tc.format, Text: tc.text}, Message: tc.message})
			if encs.Named() {
				t.Error("Named() with a schema file: the file gives the type")
			}
			if err := encs.Start(ctx, nil); err != nil {
				t.Fatal(err)
			}
			latest, err := reg.Latest(ctx, tc.subject)
			if err != nil {
				t.Fatalf("subject %q after Start: %v", tc.subject, err)
			}
			for _, typ := range []string{"", "shop.Other"} {
				b, err := encs.Encode(ctx, "", typ, []byte(tc.value))
				if err != nil {
					t.Fatal(err)
				}
				if id := int(binary.BigEndian.Uint32(b[1:5])); id != latest.ID {
					t.Errorf("encoded with id %d, want %d (subject %s)", id, latest.ID, tc.subject)
				}
			}
		})
	}
	// A schema file without a record name is refused at Start.
	encs := codec.NewEncoders(codec.EncodersOptions{Registry: schematest.NewMemory(), Format: schema.JSONSchema, Suffix: "-value",
		DefaultTopic: "out", Strategy: schema.RecordStrategy, Schema: &schema.Schema{Type: schema.JSONSchema, Text: `{"type":"object"}`},
		SchemaSetting: "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE"})
	if err := encs.Start(ctx, nil); schema.FaultOf(err) != schema.FaultSchema || !strings.Contains(err.Error(), "title") {
		t.Errorf("Start = %v, want a schema fault saying the schema has no title", err)
	}
}

// Workers run chains at once, each framed by its own Plan: the type each
// output is encoded under is its own input's, whatever the others run
// (under the race detector, with the encoders and decoder shared).
func TestRecordStrategyConcurrentChains(t *testing.T) {
	fx := newStrategyFixture(t, formatsTwoTypes[0], schema.TopicRecordStrategy)
	const workers, each = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := fx.chain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			return append(out, r), nil
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				i := (n + w) % 2
				out, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: fx.wire[i]}, nil)
				if err != nil {
					errs <- err
					return
				}
				_, name, err := fx.side.Decoder.DecodeNamed(context.Background(), out[0].Value, nil)
				if err != nil || name != fx.tt.names[i] {
					errs <- fmt.Errorf("worker %d record %d: output of type %q (%v), want %s", w, n, name, err, fx.tt.names[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Refresh moves each type's encoder to the latest version of its
// subject, registered while running.
func TestRecordStrategyRefresh(t *testing.T) {
	ctx := context.Background()
	fx := newStrategyFixture(t, formatsTwoTypes[0], schema.TopicRecordStrategy)
	encs := fx.side.Encoders
	for i := range 2 {
		if _, err := encs.Encode(ctx, "", fx.tt.names[i], []byte(fx.tt.values[i])); err != nil {
			t.Fatal(err)
		}
	}
	subject := "out-" + fx.tt.names[1]
	v2 := fx.reg.MustRegister(subject, schema.Schema{Type: schema.Avro, Text: fx.tt.schemas[1] + "\n\n"})
	if err := encs.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := encs.Subjects()[codec.Target{Topic: "out", Type: fx.tt.names[1]}]; got.ID != v2.ID || got.Subject != subject {
		t.Errorf("after Refresh the type encodes with %s id %d, want %s id %d", got.Subject, got.ID, subject, v2.ID)
	}
	b, err := encs.Encode(ctx, "", fx.tt.names[1], []byte(fx.tt.values[1]))
	if err != nil || int(binary.BigEndian.Uint32(b[1:5])) != v2.ID {
		t.Errorf("Encode after Refresh = %x, %v; want schema id %d", b, err, v2.ID)
	}
}

// Keys take their own strategy and types, beside the values': a key of
// one type and a value of the other are each encoded under their own
// type's subject (the record strategies name a key's subject as a
// value's, with no -key, as Confluent's do).
func TestRecordStrategyKeys(t *testing.T) {
	ctx := context.Background()
	fx := newStrategyFixture(t, formatsTwoTypes[0], schema.TopicRecordStrategy)
	keys := codec.NewEncoders(codec.EncodersOptions{Registry: fx.reg, Format: schema.Avro, Suffix: "-key", DefaultTopic: "out",
		Strategy: schema.TopicRecordStrategy})
	if err := keys.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	r := &transform.Registry{}
	r.Register("t", transform.Plain("test", func() (transform.Transform, error) {
		return touching{func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			return append(out, r), nil
		}, transform.PartAll}, nil
	}))
	c, err := r.Build([]transform.Entry{{Name: "t"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, last := codec.Plan(c.Touches(), codec.Side{In: schema.Avro, Out: schema.Avro, Decoder: fx.side.Decoder, Encoders: keys}, fx.side, names)
	c.Frame(first, last)
	out, err := c.Process(ctx, record.Source{}, &kgo.Record{Key: fx.wire[1], Value: fx.wire[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx.check(t, &kgo.Record{Value: out[0].Key}, "out", 1)
	fx.check(t, out[0], "out", 0)
}
