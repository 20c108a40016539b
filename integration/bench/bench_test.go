package bench

import (
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

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
			var tg *itest.Target
			if c := kafkatest.FromEnv(b); c != nil {
				tg = &itest.Target{Cluster: c}
			} else {
				tg = itest.NewFake(b)
			}
			topic, out, group := itest.Unique("bench-in"), itest.Unique("bench-out"), itest.Unique("bench-group")
			tg.NewTopics(b, 6, topic, out)
			tg.ProduceBacklog(b, topic, b.N, 100)
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

// bareCopy is the baseline: the least code that copies exactly once.
func bareCopy(b *testing.B, tg *itest.Target, group, in, out string, n int) {
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(tg.Brokers...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in), kgo.TransactionalID(group+"-bare"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := itest.BenchTimeout(n)
	ctx := itest.Context(b, d)
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

func processorCopy(b *testing.B, tg *itest.Target, group, in, out string, n int, lineage bool) {
	p := tg.Start(b, itest.InstanceOpts{Group: group, TxnID: group + "-p", Topics: []string{in}, Out: out, MaxRecords: 10_000, NoLineage: !lineage})
	d := itest.BenchTimeout(n)
	deadline := time.Now().Add(d)
	for p.Pipeline.Stats().Consumed < uint64(n) {
		select {
		case <-p.Done:
			p.Stopped = true
			b.Fatalf("processor copy: the instance stopped with %d of %d records committed: %v", p.Pipeline.Stats().Consumed, n, p.Err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("processor copy: %d of %d records committed within %s", p.Pipeline.Stats().Consumed, n, d)
		}
		time.Sleep(time.Millisecond)
	}
	p.Stop(b)
}
