package dbsink

import (
	"context"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/record"
)

// Into PostgreSQL, end-to-end latency runs to the database commit: input
// written 90 s ago, processed in batches of which the first two abort on
// purpose, is observed once per input, every one in the histogram's
// (60 s, 120 s] bucket, and /status' quantiles read about 90 s.
func TestEndToEndLatencyPostgres(t *testing.T) {
	t.Parallel()
	tg := itest.NewFake(t)
	db := pgtest.New(t)
	in := itest.Input{Topic: itest.Unique("latency-pg-in"), N: 300, Keys: 10}
	group := itest.Unique("latency-pg-group")
	tg.NewTopics(t, 3, in.Topic)
	cl, err := kgo.NewClient(tg.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const age = 90 * time.Second
	written := time.Now().Add(-age)
	recs := make([]*kgo.Record, in.N)
	for i := range recs {
		recs[i] = in.Record(i)
		recs[i].Timestamp = written
	}
	ctx, cancel := context.WithTimeout(context.Background(), itest.ProduceTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	chain := itest.FuncChain(t, "pass", func(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, r), nil
	})
	a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Chain: chain, MaxRecords: 50,
		DB: itest.OpenSink(t, db, group), InjectAbort: func(seq uint64) bool { return seq <= 2 }})
	itest.WaitFor(t, 60*time.Second, "the group to store every input's offset", func() bool { return itest.StoredTotal(t, db, group) == in.N })
	st := a.Pipeline.Status()
	a.Stop(t)

	var m dto.Metric
	if err := a.PipelineMetrics.EndToEndLatency.Metric().Write(&m); err != nil {
		t.Fatal(err)
	}
	le := map[float64]uint64{}
	for _, b := range m.Histogram.Bucket {
		le[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	if n := m.Histogram.GetSampleCount(); n != uint64(in.N) || le[60] != 0 || le[120] != uint64(in.N) {
		t.Errorf("latency histogram: %d observations, %d up to 60 s, %d up to 120 s; want all %d in (60 s, 120 s]", n, le[60], le[120], in.N)
	}
	if st.Aborts["injected"] != 2 {
		t.Errorf("%d injected aborts, want 2", st.Aborts["injected"])
	}
	if st.LatencyP50 < age.Seconds() || st.LatencyP99 > age.Seconds()+30 {
		t.Errorf("Status() latency p50 %.1f s, p99 %.1f s; want about %.0f s", st.LatencyP50, st.LatencyP99, age.Seconds())
	}
	t.Logf("%d observations summing to %.0f s; %d commits, aborts %v; p50 %.2f s, p99 %.2f s",
		m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), st.Commits, st.Aborts, st.LatencyP50, st.LatencyP99)
}
