package pipeline

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// benchSession is a memSession whose polls return the same records again
// and whose produce and end cost nothing: what the benchmarks measure is
// the loop's own work per record, not a session's.
type benchSession struct {
	*memSession
	fs kgo.Fetches
}

func (s *benchSession) Poll(context.Context, int) kgo.Fetches                  { return s.fs }
func (s *benchSession) Produce(context.Context, *kgo.Record, transform.Source) {}
func (s *benchSession) End(context.Context, int, txn.Reason) (bool, error) {
	s.inTxn = false
	return true, nil
}

// benchPerTxn is how many input records each benchmarked transaction
// holds: one poll, one transaction.
const benchPerTxn = 1000

// BenchmarkLoopStep runs the loop's step (poll, the identity chain on one
// worker, produce, end) over transactions of benchPerTxn records of one
// partition, and reports its cost per input record: ns/record and
// allocs/record (the per-transaction work, the end and its metrics
// included, shared among the records).
func BenchmarkLoopStep(b *testing.B) {
	c := newMemCluster()
	c.create("in", 1, 0)
	recs := make([]*kgo.Record, benchPerTxn)
	now := time.Now()
	for i := range recs {
		recs[i] = &kgo.Record{Offset: int64(i), Value: []byte("v"), Timestamp: now}
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{
		{Partition: 0, Records: recs, HighWatermark: benchPerTxn, LastStableOffset: benchPerTxn}}}}}}
	reg := prometheus.NewRegistry()
	ms := newMemSession(c, "bench", "bench", "in", txn.NewMetrics(reg))
	s := &benchSession{memSession: ms, fs: fs}
	chain := chainOf(b, "identity", passThrough)
	p, err := New(s, s, chain, Options{OutputTopic: "out", CommitInterval: time.Hour, MaxRecordsPerTxn: benchPerTxn,
		Metrics: NewMetrics(reg), Lineage: true})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := p.s.Init(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		if err := p.step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	records := float64(b.N * benchPerTxn)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/records, "allocs/record")
}
