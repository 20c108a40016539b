package itest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchTimeout bounds each step of a benchmark of n records (writing the
// backlog, copying it): two minutes, and a millisecond a record.
func BenchTimeout(n int) time.Duration {
	return 2*time.Minute + time.Duration(n)*time.Millisecond
}

// ProduceBacklog writes n keyed records of size bytes each.
func (tg *Target) ProduceBacklog(b *testing.B, topic string, n, size int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := []byte(strings.Repeat("v", size))
	d := BenchTimeout(n)
	ctx := Context(b, d)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i % 10_000)), Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatalf("producing a backlog of %d records to %s: not flushed within %s: %v", n, topic, d, err)
	}
}
