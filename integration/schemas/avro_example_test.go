package schemas

import (
	"bytes"
	"context"
	binenc "encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/sample"
	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/schema"
)

// avroDir is the example TestAvroExample runs: its settings, jq program
// and schemas are read from there.
const avroDir = "../../examples/avro"

// avroOrders is how many orders loadgen -format avro writes.
const avroOrders = 2_000

// avroOrder is an order of examples/avro as the chain sees it, with the
// fields that enrich.jq adds.
type avroOrder struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Amount   int64  `json:"amount_cents"`
	Currency string `json:"currency"`
	Created  int64  `json:"created_at"`
	Items    []struct {
		SKU      string `json:"sku"`
		Quantity int64  `json:"quantity"`
		Price    int64  `json:"unit_price_cents"`
	} `json:"items"`
	Total     *int64  `json:"total_with_tax_cents,omitempty"`
	ItemCount *int64  `json:"item_count,omitempty"`
	Channel   *string `json:"channel,omitempty"`
}

// The example end to end, as make run-avro runs it but on kfake and an
// in-process registry (srserver): loadgen registers order.avsc and writes
// 2,000 Avro orders, one value that is not in the wire format is written
// among them, and the processor runs with avro.env, enrich.jq and
// order-enriched.avsc. Afterwards:
//   - the processor registered order-enriched.avsc under
//     orders-enriched-value, and every output carries that schema's id;
//   - every order is one output, with the same key, its version 1 fields
//     unchanged and the three fields enrich.jq computes;
//   - the bad value is the one dead letter;
//   - order.avsc is the schema loadgen writes (sample.OrderSchema), and
//     order-enriched.avsc is accepted as version 2 of orders-value at
//     BACKWARD, as the README says.
func TestAvroExample(t *testing.T) {
	itest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := itest.EnvLines(t, "avro.env", avroFile(t, "avro.env"))
	group, in, out := itest.EnvValue(t, env, "PROCESSOR_GROUP"), itest.EnvValue(t, env, "PROCESSOR_INPUT_TOPICS"), itest.EnvValue(t, env, "PROCESSOR_OUTPUT_TOPIC")
	dlq := itest.EnvValue(t, env, "PROCESSOR_DLQ_TOPIC")

	tg := itest.NewFake(t)
	tg.NewTopics(t, 3, in, out, dlq)
	srv, err := srserver.New(srserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url, err := srv.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	brokers := tg.Brokers[0]
	loadgen := itest.BillingCommand(t, "loadgen", "-brokers", brokers, "-topic", in, "-format", "avro",
		"-schema-registry", url, "-records", strconv.Itoa(avroOrders), "-rate", "0", "-wait", "30s")
	schemaFile, err := filepath.Abs(filepath.Join(avroDir, "order-enriched.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	p := itest.RunBinary(t, "processor", launch.Instance{
		Brokers: tg.Brokers,
		Settings: map[string]string{
			"PROCESSOR_SCHEMA_REGISTRY_URL":      url,
			"PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE": schemaFile,
			"PROCESSOR_JQ_EXPR":                  avroFile(t, "enrich.jq"),
		},
		LogFormat:        "text",
		HTTPAddr:         "127.0.0.1:0",
		ProgressInterval: 100 * time.Millisecond,
		Extra:            env,
	})
	tg.ProduceSync(t, []*kgo.Record{{Topic: in, Key: []byte("bad"), Value: []byte(`{"id":"not-avro"}`)}})
	select {
	case <-loadgen.Done:
		if loadgen.Err != nil {
			t.Fatalf("loadgen: %v\n%s", loadgen.Err, loadgen.Logs.String())
		}
	case <-time.After(itest.LoadgenTimeout):
		t.Fatalf("loadgen did not finish within %s", itest.LoadgenTimeout)
	}
	itest.WaitFor(t, 60*time.Second, "the processor to consume every order", func() bool {
		select {
		case <-p.Done:
			t.Fatalf("the processor exited: %v", p.Err)
		default:
		}
		return tg.IsCaughtUp(t, group, in)
	})
	p.Terminate(t)

	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	enriched := checkAvroSubject(ctx, t, reg, out+"-value", avroFile(t, "order-enriched.avsc"))
	inputs := decodeAvro(ctx, t, reg, tg.ReadAll(t, in, true), -1)
	outputs := decodeAvro(ctx, t, reg, tg.ReadAll(t, out, true), enriched.ID)
	checkEnriched(t, inputs, outputs)
	if dead := tg.ReadAll(t, dlq, true); len(dead) != 1 || string(dead[0].Key) != "bad" {
		t.Errorf("%d dead letters, want the one value that is not Avro", len(dead))
	}

	if !jsonEqual(t, avroFile(t, "order.avsc"), sample.OrderSchema) {
		t.Errorf("examples/avro/order.avsc is not the schema loadgen -format avro writes (internal/sample.OrderSchema)")
	}
	v2, err := reg.Register(ctx, in+"-value", schema.Schema{Type: schema.Avro, Text: avroFile(t, "order-enriched.avsc")})
	if err != nil || v2.Version != 2 {
		t.Errorf("order-enriched.avsc as the next version of %s-value at BACKWARD: %+v, %v; want version 2", in, v2, err)
	}
}

// checkAvroSubject checks that subject's latest version is the schema
// text (as JSON) and returns it.
func checkAvroSubject(ctx context.Context, t *testing.T, reg schema.Registry, subject, text string) schema.Subject {
	t.Helper()
	sub, err := reg.Latest(ctx, subject)
	if err != nil {
		t.Fatalf("the output subject %s: %v", subject, err)
	}
	if sub.Schema.Type != schema.Avro || !jsonEqual(t, sub.Schema.Text, text) {
		t.Errorf("%s holds a %s schema %s, want order-enriched.avsc", subject, sub.Schema.Type, sub.Schema.Text)
	}
	return sub
}

// avroRecord is one decoded record: its key and its value as JSON.
type avroRecord struct {
	key   string
	order avroOrder
	raw   []byte
}

// decodeAvro decodes the records that are in the wire format, by id,
// keyed by the order's id; with wantID ≥ 0, each must carry that schema
// id, and each must decode.
func decodeAvro(ctx context.Context, t *testing.T, reg schema.Registry, recs []*kgo.Record, wantID int) map[string]avroRecord {
	t.Helper()
	dec := schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{})
	got := map[string]avroRecord{}
	for _, r := range recs {
		if len(r.Value) < 5 || r.Value[0] != 0 {
			if wantID >= 0 {
				t.Errorf("output %s/%d@%d is not in the wire format: %q", r.Topic, r.Partition, r.Offset, r.Value)
			}
			continue
		}
		if id := int(binenc.BigEndian.Uint32(r.Value[1:5])); wantID >= 0 && id != wantID {
			t.Errorf("output %s/%d@%d has schema id %d, want %d", r.Topic, r.Partition, r.Offset, id, wantID)
		}
		js, err := dec.Decode(ctx, r.Value, nil)
		if err != nil {
			t.Fatalf("%s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		var o avroOrder
		if err := json.Unmarshal(js, &o); err != nil {
			t.Fatalf("%s/%d@%d decodes to %s: %v", r.Topic, r.Partition, r.Offset, js, err)
		}
		if _, dup := got[o.ID]; dup {
			t.Errorf("order %s is in %s twice", o.ID, r.Topic)
		}
		got[o.ID] = avroRecord{key: string(r.Key), order: o, raw: js}
	}
	return got
}

// checkEnriched checks that every input order is one output with the same
// key, its fields unchanged, and the three fields of enrich.jq.
func checkEnriched(t *testing.T, inputs, outputs map[string]avroRecord) {
	t.Helper()
	if len(inputs) != avroOrders || len(outputs) != avroOrders {
		t.Errorf("%d Avro orders in, %d out; want %d of each", len(inputs), len(outputs), avroOrders)
	}
	for id, in := range inputs {
		o, ok := outputs[id]
		if !ok {
			t.Errorf("order %s has no output", id)
			continue
		}
		e := o.order
		if e.Total == nil || e.ItemCount == nil || e.Channel == nil {
			t.Errorf("order %s: output %s lacks an enriched field", id, o.raw)
			continue
		}
		units := int64(0)
		for _, it := range in.order.Items {
			units += it.Quantity
		}
		channel := "retail"
		if len(in.order.Items) >= 3 {
			channel = "bulk"
		}
		tax := int64(math.Round(float64(in.order.Amount) * 120 / 100))
		if *e.Total != tax || *e.ItemCount != units || *e.Channel != channel {
			t.Errorf("order %s: total %d, item_count %d, channel %q; want %d, %d, %q", id, *e.Total, *e.ItemCount, *e.Channel, tax, units, channel)
		}
		e.Total, e.ItemCount, e.Channel = nil, nil, nil
		if o.key != in.key || !reflect.DeepEqual(e, in.order) {
			t.Errorf("order %s: output %s (key %q), input %s (key %q): the version 1 fields differ", id, o.raw, o.key, in.raw, in.key)
		}
	}
}

// avroFile returns the content of a file of the example.
func avroFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(avroDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb) || bytes.Equal([]byte(a), []byte(b))
}
