package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/metric"
	"github.com/streamproc/processor/record"
)

// latencyBuckets returns h's sample count, sum, and cumulative count per
// upper bound.
func latencyBuckets(t *testing.T, h *metric.BatchHistogram) (uint64, float64, map[float64]uint64) {
	t.Helper()
	var m dto.Metric
	if err := h.Metric().Write(&m); err != nil {
		t.Fatal(err)
	}
	le := map[float64]uint64{}
	for _, b := range m.Histogram.Bucket {
		le[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), le
}

// oldRecords returns n records written age ago.
func oldRecords(topic string, n int, age time.Duration) []*kgo.Record {
	ts := time.Now().Add(-age)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i%7)), Value: []byte("old:" + strconv.Itoa(i)), Timestamp: ts}
	}
	return recs
}

// Records written 90 s ago: while the transform holds the first of them,
// lag seconds (Status, per partition and the gauge of its partition) read
// their age; once committed, every one of them is observed in the
// histogram's (60 s, 120 s] bucket, Status' quantiles read about 90 s, and
// lag seconds fall to 0.
func TestLatencyOfOldRecords(t *testing.T) {
	e := newLoopEnv(t)
	const n, age = 60, 90 * time.Second
	e.produceInputs(oldRecords(e.in, n, age), kgo.ProducerLinger(time.Millisecond))
	g := newGate(20 * time.Second)
	run := e.start("g", "g-old", g.chain(t), Options{})
	g.wait(t, run, "the first old record")

	st := run.p.Status()
	if st.LagSeconds < age.Seconds()-1 || st.LagSeconds > age.Seconds()+15 {
		t.Errorf("Status().LagSeconds = %.1f while the records written %s ago are not committed, want about %.0f", st.LagSeconds, age, age.Seconds())
	}
	held := 0
	for _, ps := range st.Partitions {
		if ps.Lag == 0 {
			continue
		}
		if ps.LagSeconds < age.Seconds()-1 || ps.LagSeconds > age.Seconds()+15 {
			t.Errorf("partition %d: LagSeconds = %.1f with %d records not committed, want about %.0f", ps.Partition, ps.LagSeconds, ps.Lag, age.Seconds())
		}
		gauge := testutil.ToFloat64(run.pm.LagSeconds.WithLabelValues(e.in, strconv.Itoa(int(ps.Partition))))
		if ps.Position > max(ps.Committed, 0) && (gauge < age.Seconds()-1 || gauge > age.Seconds()+15) {
			t.Errorf("partition %d: processor_consumer_lag_seconds = %.1f after its records were fetched, want about %.0f", ps.Partition, gauge, age.Seconds())
		}
		held++
	}
	if held == 0 {
		t.Errorf("no partition shows lag while the transform holds a record: %+v", st.Partitions)
	}
	if c, _, _ := latencyBuckets(t, run.pm.EndToEndLatency); c != 0 {
		t.Errorf("%d latencies observed before any commit, want 0", c)
	}
	close(g.release)
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	// The commit shows in the offsets before the loop has accounted for it
	// (observed the latencies, then counted the records consumed).
	eventually(t, 10*time.Second, "the loop to account for every input", run, func() bool { return run.p.Stats().Consumed == n })

	count, _, le := latencyBuckets(t, run.pm.EndToEndLatency)
	if count != n || le[60] != 0 || le[120] != n {
		t.Errorf("latency histogram: %d observations, %d up to 60 s, %d up to 120 s; want all %d in (60 s, 120 s]", count, le[60], le[120], n)
	}
	st = run.p.Status()
	if st.LatencyP50 < age.Seconds() || st.LatencyP99 < st.LatencyP50 || st.LatencyP99 > age.Seconds()+15 {
		t.Errorf("Status() latency p50 %.2f s, p99 %.2f s, want about %.0f s", st.LatencyP50, st.LatencyP99, age.Seconds())
	}
	eventually(t, 10*time.Second, "lag seconds to fall to 0", run, func() bool {
		st := run.p.Status()
		for _, ps := range st.Partitions {
			if testutil.ToFloat64(run.pm.LagSeconds.WithLabelValues(e.in, strconv.Itoa(int(ps.Partition)))) != 0 {
				return false
			}
		}
		return st.LagSeconds == 0
	})
	run.stop(t, 10*time.Second)
}

// A transform that sleeps adds its sleep to every record's latency: with
// fresh records and one worker, each record waits at least its own sleep
// before its transaction commits.
func TestLatencyAddsTransformSleep(t *testing.T) {
	e := newLoopEnv(t)
	const n, sleep = 6, 300 * time.Millisecond
	chain := chainOf(t, "sleep", func(ctx context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		time.Sleep(sleep)
		return append(out, r), nil
	})
	run := e.start("g", "g-sleep", chain, Options{})
	e.produce(n, 3)
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	count, sum, le := latencyBuckets(t, run.pm.EndToEndLatency)
	if count != n || le[0.25] != 0 || le[10] != n {
		t.Errorf("latency histogram: %d observations, %d up to 0.25 s, %d up to 10 s; want all %d above the %s sleep", count, le[0.25], le[10], n, sleep)
	}
	if sum < float64(n)*sleep.Seconds() {
		t.Errorf("latencies sum to %.2f s, want at least %d × %s", sum, n, sleep)
	}
}

// An aborted transaction's records are not observed; their retry's commit
// observes each once, filtered records included.
func TestLatencyObservesCommittedOnce(t *testing.T) {
	e := newMemEnv(t)
	const n = 200
	e.produce(n, 10)
	chain := loopChain(t, func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if loopSeq(string(r.Value))%2 == 1 {
			return out, nil // filtered: still a committed input
		}
		return append(out, r), nil
	})
	run := e.start("g", "g-once", chain, Options{MaxRecordsPerTxn: 50, InjectAbort: func(seq uint64) bool { return seq <= 2 }})
	eventually(t, 20*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)
	if a := run.p.Stats().Aborts; a != 2 {
		t.Fatalf("%d aborts, want 2", a)
	}
	if count, _, _ := latencyBuckets(t, run.pm.EndToEndLatency); count != n {
		t.Errorf("latency histogram has %d observations for %d inputs committed once (two aborted attempts), want %d", count, n, n)
	}
}

func TestLatencyOf(t *testing.T) {
	for _, c := range []struct {
		now, ts int64
		want    float64
		ok      bool
	}{
		{10_000, 9_000, 1, true},
		{10_000, 10_000, 0, true},
		{10_000, 12_000, 0, true}, // in the future: 0
		{10_000, 0, 0, false},     // no timestamp: not observed
		{10_000, -1, 0, false},
	} {
		if got, ok := latencyOf(c.now, c.ts); got != c.want || ok != c.ok {
			t.Errorf("latencyOf(%d, %d) = %v, %v; want %v, %v", c.now, c.ts, got, ok, c.want, c.ok)
		}
	}
}

// The window's quantiles weigh each sample by the records it stands for,
// cover LatencyWindow only, and are 0 when nothing committed in it.
func TestLatencyWindowQuantiles(t *testing.T) {
	lw := newLatencyWindow(metric.NewBatchHistogram("test_latency_seconds", "test", LatencyBuckets))
	now := time.Now()
	ms := now.UnixMilli()
	if q := lw.quantiles(now, 0.5); q[0] != 0 {
		t.Errorf("empty window: p50 %v, want 0", q[0])
	}
	// Long ago: out of the window.
	lw.add(ms-LatencyWindow.Milliseconds()-1000, []int64{1})
	// A large transaction at 1 s of latency, a small one at 5 s.
	big := make([]int64, 10*latencySamplesPerTxn)
	for i := range big {
		big[i] = ms - 1000
	}
	lw.add(ms, big)
	lw.add(ms, []int64{ms - 5000, ms - 5000})
	q := lw.quantiles(now, 0.5, 0.99, 1)
	if q[0] != 1 || q[1] != 1 || q[2] != 5 {
		t.Errorf("quantiles 0.5, 0.99, 1 = %v, want 1, 1, 5 (the small transaction weighs 2 of %d records)", q, len(big)+2)
	}
}

// Lag seconds follow the first record past the committed offset that a
// poll brought: its age while uncommitted, kept after a commit that left
// lag until the next poll, 0 when caught up, and 0 before any is known.
func TestPartitionLagSeconds(t *testing.T) {
	o := &offsets{position: -1, committed: -1, logStart: 0, logEnd: -1, lastStable: -1}
	now := time.Now().UnixMilli()
	if s := o.lagSeconds(now); s != 0 {
		t.Errorf("nothing known: %v, want 0", s)
	}
	rec := func(off int64, age time.Duration) *kgo.Record {
		return &kgo.Record{Offset: off, Timestamp: time.UnixMilli(now).Add(-age)}
	}
	o.lastStable = 10
	o.fetchedHead([]*kgo.Record{rec(0, 30*time.Second), rec(1, 20*time.Second)})
	if s := o.lagSeconds(now); s != 30 {
		t.Errorf("first fetched record 30 s old: %v, want 30", s)
	}
	o.fetchedHead([]*kgo.Record{rec(2, 5*time.Second)})
	if s := o.lagSeconds(now); s != 30 {
		t.Errorf("a later poll changes nothing while the first is not committed: %v, want 30", s)
	}
	o.committed, o.headStale = 3, true
	if s := o.lagSeconds(now); s != 30 {
		t.Errorf("after a commit, before the next poll: %v, want the last known 30", s)
	}
	o.fetchedHead([]*kgo.Record{rec(3, 2*time.Second)})
	if s := o.lagSeconds(now); s != 2 {
		t.Errorf("the next poll's first record, 2 s old: %v, want 2", s)
	}
	o.committed = 10
	if s := o.lagSeconds(now); s != 0 {
		t.Errorf("caught up: %v, want 0", s)
	}
}

// BenchmarkLatencyAtCommit is the commit's latency work per record
// (ns/op is per record): the tally and window of a transaction of
// benchPerTxn records, against one prometheus.Histogram Observe per
// record, which it replaces.
func BenchmarkLatencyAtCommit(b *testing.B) {
	now := time.Now().UnixMilli()
	stamps := make([]int64, benchPerTxn)
	for i := range stamps {
		stamps[i] = now - int64(i%5000)
	}
	b.Run("tally", func(b *testing.B) {
		h := metric.NewBatchHistogram("bench_latency_seconds", "bench", LatencyBuckets)
		p := &Pipeline{o: Options{Metrics: &Metrics{EndToEndLatency: h}}, latency: newLatencyWindow(h)}
		p.open.stamps = stamps
		b.ReportAllocs()
		for i := 0; i < b.N; i += benchPerTxn {
			p.observeCommitted(now)
		}
	})
	b.Run("client_golang", func(b *testing.B) {
		h := metric.Histogram("bench_latency_seconds", "bench", LatencyBuckets)
		b.ReportAllocs()
		for i := 0; i < b.N; i += benchPerTxn {
			for _, ts := range stamps {
				if l, ok := latencyOf(now, ts); ok {
					h.Observe(l)
				}
			}
		}
	})
}
