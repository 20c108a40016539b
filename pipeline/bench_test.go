package pipeline

import (
	"context"
	"crypto/sha256"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/sample"
	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/jq"
	"github.com/streamproc/processor/txn"
)

// benchSession is a session in memory whose polls return the same records
// again and whose produce and end cost nothing: what the benchmarks
// measure is the loop's own work per record, not a session's.
type benchSession struct {
	*memkafka.Session
	fs    kgo.Fetches
	vals  [][]byte // the records' values, restored at each poll; nil: not
	inTxn bool
	begun time.Time // when the open transaction began
}

// Poll returns the same records again, their values restored where a
// chain replaced them (vals set).
func (s *benchSession) Poll(context.Context, int) kgo.Fetches {
	if s.vals != nil {
		for i, r := range s.fs[0].Topics[0].Partitions[0].Records {
			r.Value = s.vals[i]
		}
	}
	return s.fs
}

func (s *benchSession) Begin(context.Context) error { s.inTxn, s.begun = true, time.Now(); return nil }
func (s *benchSession) InTxn() bool                 { return s.inTxn }
func (s *benchSession) Begun() time.Time            { return s.begun }

func (s *benchSession) Produce(context.Context, *kgo.Record, record.Source) {}
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
	c := memkafka.NewCluster(wireBytes)
	c.Create("in", 1, 0)
	recs := make([]*kgo.Record, benchPerTxn)
	now := time.Now()
	for i := range recs {
		recs[i] = &kgo.Record{Offset: int64(i), Value: []byte("v"), Timestamp: now}
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{
		{Partition: 0, Records: recs, HighWatermark: benchPerTxn, LastStableOffset: benchPerTxn}}}}}}
	reg := prometheus.NewRegistry()
	ms := newMemSession(c, "bench", "bench", "in", txn.NewMetrics(reg))
	s := &benchSession{Session: ms, fs: fs}
	chain := chainOf(b, "identity", passThrough)
	p, err := New(chain, Options{OutputTopic: "out", CommitInterval: time.Hour, MaxRecordsPerTxn: benchPerTxn,
		Metrics: NewMetrics(reg), Lineage: true})
	if err != nil {
		b.Fatal(err)
	}
	p.attach(s, s)
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

// BenchmarkWorkersOnePartition runs the loop's step over transactions of
// benchPerTxn records of one partition through a CPU-bound chain (a hash
// of 16 KiB per record) at 1 and 2 workers: a chain that is not ordered,
// whose runs of the partition the workers share, and an ordered one under
// OrderKey (100 keys) and OrderPartition. Compare the ns/record of the
// worker counts: what sharing one partition gains on the machine's cores.
func BenchmarkWorkersOnePartition(b *testing.B) {
	burn := make([]byte, 16<<10)
	fn := func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		sum := sha256.Sum256(burn)
		r.Value = sum[:1]
		return append(out, r), nil
	}
	for _, mode := range []struct {
		name     string
		ordered  bool
		ordering Ordering
	}{{"shared", false, ""}, {"key", true, OrderKey}, {"partition", true, OrderPartition}} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", mode.name, workers), func(b *testing.B) {
				mk := func() *transform.Chain {
					if mode.ordered {
						return orderedChain(b, fn)
					}
					return chainOf(b, "burn", fn)
				}
				var more []*transform.Chain
				for range workers - 1 {
					more = append(more, mk())
				}
				benchSteps(b, mk(), Options{Chains: more, Ordering: mode.ordering}, 100)
			})
		}
	}
}

// orderedChain builds a chain of the one ordered transform fn.
func orderedChain(b testing.TB, fn transform.Func) *transform.Chain {
	reg := &transform.Registry{}
	reg.Register("ordered", transform.Plain("", func() (transform.Transform, error) { return orderedFunc(fn), nil }))
	c, err := reg.Build([]transform.Entry{{Name: "ordered"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchSteps runs the loop's step over transactions of benchPerTxn records
// of one partition with keys keys through chain and reports ns/record.
func benchSteps(b *testing.B, chain *transform.Chain, o Options, keys int) {
	recs := make([]*kgo.Record, benchPerTxn)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i % keys)), Value: []byte("v")}
	}
	benchRecords(b, chain, o, recs)
}

// benchRecords runs the loop's step over transactions of recs, in one
// partition, through chain and reports ns/record. Their values are
// restored before each transaction.
func benchRecords(b *testing.B, chain *transform.Chain, o Options, recs []*kgo.Record) {
	c := memkafka.NewCluster(wireBytes)
	c.Create("in", 1, 0)
	now := time.Now()
	vals := make([][]byte, len(recs))
	for i, r := range recs {
		r.Offset, r.Timestamp, vals[i] = int64(i), now, r.Value
	}
	n := int64(len(recs))
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{
		{Partition: 0, Records: recs, HighWatermark: n, LastStableOffset: n}}}}}}
	reg := prometheus.NewRegistry()
	ms := newMemSession(c, "bench", "bench", "in", txn.NewMetrics(reg))
	s := &benchSession{Session: ms, fs: fs, vals: vals}
	o.OutputTopic, o.CommitInterval, o.MaxRecordsPerTxn, o.Metrics, o.Lineage = "out", time.Hour, len(recs), NewMetrics(reg), true
	p, err := New(chain, o)
	if err != nil {
		b.Fatal(err)
	}
	p.attach(s, s)
	ctx := context.Background()
	if err := p.s.Init(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := p.step(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

// BenchmarkJQOnePartition runs the loop's step over transactions of
// benchPerTxn sample orders of 100 bytes, in one partition, through the
// jq rows' chain of make bench at 1 and 2 workers: what sharing one
// partition's runs gains on the machine's cores with no broker beside
// them (on Apache Kafka here the broker takes part of the same cores).
func BenchmarkJQOnePartition(b *testing.B) {
	mk := func() *transform.Chain {
		tr, err := jq.New(&jq.Settings{Expr: sample.JQChain})
		if err != nil {
			b.Fatal(err)
		}
		return chainOf(b, "jq", tr.Process)
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			recs := make([]*kgo.Record, benchPerTxn)
			for i := range recs {
				recs[i] = sample.Order(int64(i), 100, 100)
			}
			var more []*transform.Chain
			for range workers - 1 {
				more = append(more, mk())
			}
			benchRecords(b, mk(), Options{Chains: more}, recs)
		})
	}
}
