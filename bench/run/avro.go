package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/sample"
	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/schema"
)

// benchOrderSchema is the Avro schema of the Avro rows' input: the fields
// of sample.Order's JSON, in its order; pad is absent from the smallest
// orders, hence its default.
const benchOrderSchema = `{"type": "record", "name": "Order", "namespace": "bench", "fields": [
  {"name": "order_id", "type": "string"},
  {"name": "customer", "type": "string"},
  {"name": "amount_cents", "type": "long"},
  {"name": "seq", "type": "long"},
  {"name": "pad", "type": "string", "default": ""}
]}`

// benchOutSchema is the Avro schema of jqExpr's output: the input's
// fields without pad, and the five that jqExpr derives.
const benchOutSchema = `{"type": "record", "name": "EnrichedOrder", "namespace": "bench", "fields": [
  {"name": "order_id", "type": "string"},
  {"name": "customer", "type": "string"},
  {"name": "amount_cents", "type": "long"},
  {"name": "seq", "type": "long"},
  {"name": "amount", "type": "double"},
  {"name": "tier", "type": "string"},
  {"name": "customer_no", "type": "long"},
  {"name": "ref", "type": "string"},
  {"name": "pad_len", "type": "long"}
]}`

// avroFormat is the Format of the rows whose input and output are Avro.
const avroFormat = "avro"

// needsAvro reports whether a selected system reads Avro.
func needsAvro(o options) bool {
	for _, k := range o.systems {
		if s, _ := systemByKey(k); s.format == avroFormat {
			return true
		}
	}
	return false
}

// startRegistry starts an in-process Schema Registry (srserver, in
// memory) on a free loopback port for the Avro rows, and writes the
// output schema where their processors read it
// (PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE). It runs until ctx ends.
func (e *environment) startRegistry(ctx context.Context) error {
	srv, err := srserver.New(srserver.Options{})
	if err != nil {
		return err
	}
	url, err := srv.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.avroOut = filepath.Join(e.cache, "avro-out.avsc")
	if err := os.WriteFile(e.avroOut, []byte(benchOutSchema), 0o644); err != nil {
		return err
	}
	if e.reg, err = schema.NewClient(schema.ClientOptions{URLs: []string{url}}); err != nil {
		return err
	}
	e.registry = url
	say("schema registry: srserver (in process, in memory) at %s, for the Avro rows", url)
	return nil
}

// avroInput is the Avro twin of the JSON input js: the same orders, each
// value encoded with benchOrderSchema, registered under <topic>-value.
func avroInput(ctx context.Context, e *environment, js *input) (*input, error) {
	in := &input{topic: js.topic + "-avro", size: js.size, records: js.records, format: avroFormat}
	sub, err := e.reg.Register(ctx, in.topic+"-value", schema.Schema{Type: schema.Avro, Text: benchOrderSchema})
	if err != nil {
		return nil, fmt.Errorf("registering the Avro input schema: %w", err)
	}
	enc, err := schema.NewEncoder(ctx, e.reg, sub, schema.EncoderOptions{})
	if err != nil {
		return nil, err
	}
	in.gen = func(n int64) *kgo.Record {
		r := sample.Order(n, 1000, in.size)
		v, err := enc.Encode(nil, r.Value)
		if err != nil {
			panic(fmt.Sprintf("bench: a sample order does not fit the bench schema: %v", err))
		}
		r.Value = v
		return r
	}
	return in, nil
}
