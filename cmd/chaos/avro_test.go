package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/schema"
)

// avroDriver returns a driver of -value-format avro with its schemas set
// up in an in-process registry.
func avroDriver(t *testing.T, records int) *driver {
	t.Helper()
	d := &driver{o: options{valueFormat: "avro", records: records, transforms: []string{"jq"}, jqExpr: avroJQExpr},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), in: "chaos-in-x", out: "chaos-out-x"}
	stop, err := d.setUpSchemas()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return d
}

// decodeJSON decodes wire-format b into its JSON members.
func decodeJSON(t *testing.T, d *driver, b []byte) map[string]any {
	t.Helper()
	js, err := schema.NewDecoder(d.reg, schema.Avro, schema.DecoderOptions{}).Decode(context.Background(), b, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The ordinary inputs are written with the input's first schema version
// up to the half of the input and with its second (half 2) from there on;
// both decode to the JSON the chain expects, and the chain's output of
// either fits the output schema.
func TestAvroInputsEvolve(t *testing.T) {
	d := avroDriver(t, 10)
	a, err := d.newAvroInputs()
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.ordinary("k4", 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.at(5); err != nil {
		t.Fatal(err)
	}
	second, err := a.ordinary("k5", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.inSubjects) != 2 || d.inSubjects[1].Version != 2 {
		t.Fatalf("input subject versions %+v, want 2", d.inSubjects)
	}
	if m := decodeJSON(t, d, first); m["key"] != "k4" || m["seq"] != 4.0 || m["half"] != nil {
		t.Errorf("first half input decodes to %v", m)
	}
	if m := decodeJSON(t, d, second); m["key"] != "k5" || m["seq"] != 5.0 || m["half"] != 2.0 {
		t.Errorf("second half input decodes to %v", m)
	}
	enc, err := schema.NewEncoder(context.Background(), d.reg, d.outSubject, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range [][]byte{first, second} {
		m := decodeJSON(t, d, in)
		m["seen"] = true
		js, _ := json.Marshal(m)
		out, err := enc.Encode(nil, js)
		if err != nil {
			t.Fatalf("the output of %v does not fit the output schema: %v", m, err)
		}
		var v outputValue
		_ = json.Unmarshal(mustJSON(t, d, out), &v)
		if why := d.wrongOutput(m["key"].(string), v); why != "" {
			t.Errorf("output %s judged wrong: %s", js, why)
		}
	}
}

// mustJSON decodes wire-format b to JSON text.
func mustJSON(t *testing.T, d *driver, b []byte) []byte {
	t.Helper()
	js, err := schema.NewDecoder(d.reg, schema.Avro, schema.DecoderOptions{}).Decode(context.Background(), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Every notjson variant fails the decode stage as the record's own
// fault; a nearlimit input is an Avro record of nearLimitMin to
// nearLimitMax bytes whose output still fits max.message.bytes.
func TestAvroPoison(t *testing.T) {
	d := avroDriver(t, 1000)
	a, err := d.newAvroInputs()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dec := schema.NewDecoder(d.reg, schema.Avro, schema.DecoderOptions{})
	for _, v := range avroPoisonVariants[check.NotJSON] {
		b, err := a.poison(rng, v, check.PoisonKey(check.NotJSON, 7), 7)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		js, err := dec.Decode(context.Background(), b, nil)
		if schema.FaultOf(err) != schema.FaultRecord {
			t.Errorf("%s (% x...): decoded to %.80q, err %v; want the record's fault", v, b[:min(len(b), 8)], js, err)
		}
	}
	enc, err := schema.NewEncoder(context.Background(), d.reg, d.outSubject, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := check.PoisonKey(check.NearLimit, 9)
	for range 3 {
		b, err := a.poison(rng, "pad", key, 9)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < nearLimitMin || len(b) > nearLimitMax {
			t.Errorf("nearlimit input of %d bytes, want %d to %d", len(b), nearLimitMin, nearLimitMax)
		}
		js := mustJSON(t, d, b)
		js = slices.Concat(js[:len(js)-1], []byte(`,"seen":true}`))
		out, err := enc.Encode(nil, js)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 1048588-300 {
			t.Errorf("nearlimit output of %d bytes leaves no room for headers and batch framing", len(out))
		}
		var v outputValue
		_ = json.Unmarshal(mustJSON(t, d, out), &v)
		if why := d.wrongOutput(key, v); why != "" {
			t.Errorf("nearlimit output judged wrong: %s", why)
		}
	}
}

// The output audit names what is wrong: another key, the wrong half, no
// seen, a pad on an ordinary record.
func TestWrongOutput(t *testing.T) {
	d := &driver{o: options{records: 10, transforms: []string{"jq"}}}
	seq := func(n int) *int { return &n }
	for _, c := range []struct {
		key  string
		v    outputValue
		want string
	}{
		{"k1", outputValue{Key: "k1", Seq: seq(1), Half: 1, Seen: true}, ""},
		{"k6", outputValue{Key: "k6", Seq: seq(6), Half: 2, Seen: true}, ""},
		{"k1", outputValue{Key: "k2", Seq: seq(1), Half: 1, Seen: true}, "key"},
		{"k6", outputValue{Key: "k6", Seq: seq(6), Half: 1, Seen: true}, "half 1, want 2"},
		{"k1", outputValue{Key: "k1", Seq: seq(1), Half: 1}, "seen false"},
		{"k1", outputValue{Key: "k1", Seq: seq(1), Half: 1, Seen: true, Pad: "x"}, "pad"},
	} {
		got := d.wrongOutput(c.key, c.v)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("wrongOutput(%s, %+v) = %q, want %q", c.key, c.v, got, c.want)
		}
	}
}

// With -value-format avro every instance decodes Avro input through the
// drill's registry; the output format and subject stay the defaults.
func TestAvroInstanceEnvironment(t *testing.T) {
	d := &driver{o: options{valueFormat: "avro", transforms: []string{"jq"}, jqExpr: avroJQExpr, policies: []string{"dlq"}, sink: "kafka"},
		brokers: []string{"127.0.0.1:1"}, group: "chaos-x", in: "chaos-in-x", out: "chaos-out-x", registryURL: "http://127.0.0.1:2"}
	env := d.instance(1).Env()
	for _, want := range []string{"PROCESSOR_VALUE_FORMAT=avro", "PROCESSOR_SCHEMA_REGISTRY_URL=http://127.0.0.1:2"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment %v lacks %s", env, want)
		}
	}
	for _, e := range env {
		if strings.HasPrefix(e, "PROCESSOR_OUTPUT_VALUE_") {
			t.Errorf("environment sets %s; the drill relies on the defaults", e)
		}
	}
}
