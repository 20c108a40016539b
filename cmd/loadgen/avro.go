package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/sample"
	"github.com/streamproc/processor/schema"
)

// avroOrders registers sample.OrderSchema under <topic>-value at
// c.registry, retrying while the registry cannot be reached (for c.wait:
// it may be starting, as the embedded one of make run-avro is), and
// returns the generator of Avro orders encoded with it.
func avroOrders(ctx context.Context, c config, log *slog.Logger) (func(n int64) *kgo.Record, error) {
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{c.registry}})
	if err != nil {
		return nil, err
	}
	subject := c.topic + "-value"
	sub, err := registerWithRetry(ctx, reg, subject, c.wait)
	if err != nil {
		return nil, err
	}
	log.Info("order schema registered", "subject", sub.Subject, "version", sub.Version, "id", sub.ID)
	enc, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{})
	if err != nil {
		return nil, err
	}
	return func(n int64) *kgo.Record {
		key, js := sample.AvroOrder(n, c.keys, time.Now().UnixMilli())
		v, err := enc.Encode(nil, js)
		if err != nil {
			// The sample orders fit their schema (internal/sample's test).
			panic(fmt.Sprintf("loadgen: encoding order %d: %v", n, err))
		}
		return &kgo.Record{Key: key, Value: v}
	}, nil
}

// registerWithRetry registers the order schema under subject, trying
// again for wait while the registry is unreachable (retryFor); any other
// failure (a refused schema, refused credentials) ends it at once.
func registerWithRetry(ctx context.Context, reg schema.Registry, subject string, wait time.Duration) (sub schema.Subject, err error) {
	err = retryFor(ctx, wait, "the schema registry", func() (retry bool, err error) {
		sub, err = reg.Register(ctx, subject, schema.Schema{Type: schema.Avro, Text: sample.OrderSchema})
		return schema.FaultOf(err) == schema.FaultRegistry, err
	})
	if err != nil {
		return schema.Subject{}, err
	}
	return sub, nil
}
