package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// BenchmarkCopy measures, side by side in one run, how fast a bare franz-go
// GroupTransactSession copier and the processor (identity chain, with and
// without lineage headers, which add about 70 bytes to each record) drain
// the same backlog of 100-byte records over 6 partitions, ending a transaction
// every 10,000 records. b.N is the number of records; the result is in
// records/s. Against kfake both share the CPU with the in-process broker,
// so compare the ratio, not the absolute figures; set
// PROCESSOR_TEST_BROKERS to run against a real cluster.
func BenchmarkCopy(b *testing.B) {
	for _, kind := range []string{"bare", "processor", "processor-nolineage"} {
		b.Run(kind, func(b *testing.B) {
			var tg *target
			if c := kafkatest.FromEnv(b); c != nil {
				tg = &target{c}
			} else {
				tg = newFake(b)
			}
			topic, out, group := unique("bench-in"), unique("bench-out"), unique("bench-group")
			tg.createTopics(b, 6, topic, out)
			tg.produceBacklog(b, topic, b.N, 100)
			b.ResetTimer()
			start := time.Now()
			switch kind {
			case "bare":
				bareCopy(b, tg, group, topic, out, b.N)
			default:
				processorCopy(b, tg, group, topic, out, b.N, kind == "processor")
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// benchTimeout bounds each step of a benchmark of n records (writing the
// backlog, copying it): two minutes, and a millisecond a record.
func benchTimeout(n int) time.Duration {
	return 2*time.Minute + time.Duration(n)*time.Millisecond
}

// bareCopy is the baseline: the least code that copies exactly once.
func bareCopy(b *testing.B, tg *target, group, in, out string, n int) {
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tg.Brokers...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in), kgo.TransactionalID(group+"-bare"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := benchTimeout(n)
	ctx := testContext(b, d)
	for done := 0; done < n; {
		fs := s.PollRecords(ctx, 10_000)
		if ctx.Err() != nil {
			b.Fatalf("bare copy: %d of %d records committed within %s", done, n, d)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			b.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Topic = out
			s.Produce(ctx, r, nil)
		})
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			b.Fatalf("bare copy, ending a transaction with %d of %d records committed: %v", done, n, err)
		}
		if committed {
			done += fs.NumRecords()
		}
	}
}

func processorCopy(b *testing.B, tg *target, group, in, out string, n int, lineage bool) {
	p := tg.start(b, instanceOpts{group: group, txnID: group + "-p", topics: []string{in}, out: out, maxRecords: 10_000, noLineage: !lineage})
	d := benchTimeout(n)
	deadline := time.Now().Add(d)
	for p.p.Stats().Consumed < uint64(n) {
		select {
		case <-p.done:
			p.stopped = true
			b.Fatalf("processor copy: the instance stopped with %d of %d records committed: %v", p.p.Stats().Consumed, n, p.err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("processor copy: %d of %d records committed within %s", p.p.Stats().Consumed, n, d)
		}
		time.Sleep(time.Millisecond)
	}
	p.stop(b)
}

// produceBacklog writes n keyed records of size bytes each.
func (tg *target) produceBacklog(b *testing.B, topic string, n, size int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := []byte(strings.Repeat("v", size))
	d := benchTimeout(n)
	ctx := testContext(b, d)
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i % 10_000)), Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatalf("producing a backlog of %d records to %s: not flushed within %s: %v", n, topic, d, err)
	}
}
