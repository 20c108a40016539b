package pipeline

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// BenchmarkIdentityTwoWorkers runs the loop's step over transactions of
// benchPerTxn records spread over 6 partitions through the identity chain
// with two workers, as the processor runs it by default on 2 cores: in the
// loop (how a pass-through chain runs), and handed to the workers as it
// was before (passThrough off), side by side. ns/record is the loop's
// whole step, lineage and the end included; cpu-ns/record the process's
// CPU time (every goroutine's, the workers' too) over the same records.
func BenchmarkIdentityTwoWorkers(b *testing.B) {
	const parts = 6
	c := memkafka.NewCluster(wireBytes)
	c.Create("in", parts, 0)
	now := time.Now()
	var ps []kgo.FetchPartition
	for p := range parts {
		recs := make([]*kgo.Record, benchPerTxn/parts)
		for i := range recs {
			recs[i] = &kgo.Record{Offset: int64(i), Value: make([]byte, 100), Timestamp: now}
		}
		ps = append(ps, kgo.FetchPartition{Partition: int32(p), Records: recs, HighWatermark: int64(len(recs)), LastStableOffset: int64(len(recs))})
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: ps}}}}
	for _, mode := range []struct {
		name        string
		passThrough bool
	}{{"in-the-loop", true}, {"on-workers", false}} {
		b.Run(mode.name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			s := &benchSession{Session: newMemSession(c, "bench", "bench", "in", txn.NewMetrics(reg)), fs: fs}
			p, err := New(identityChain(b, transform.DefaultMaxOutputBytes), Options{OutputTopic: "out", CommitInterval: time.Hour,
				MaxRecordsPerTxn: benchPerTxn, Metrics: NewMetrics(reg), Lineage: true,
				Chains: []*transform.Chain{identityChain(b, transform.DefaultMaxOutputBytes)}})
			if err != nil {
				b.Fatal(err)
			}
			p.pool.passThrough = mode.passThrough
			p.attach(s, s)
			ctx := context.Background()
			if err := p.s.Init(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				if err := p.step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			records := float64(b.N * benchPerTxn)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/records, "cpu-ns/record")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
