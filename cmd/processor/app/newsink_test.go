package app

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/sink/sinktest"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/identity"
)

// A new destination is one package (sinktest, implementing
// sink.Transactional) plus one registration: registered as "memory", it
// is chosen by PROCESSOR_SINK=memory, its settings read from
// PROCESSOR_MEMORY_<SETTING>, and the loop runs through it end to end. Its
// outputs are written exactly once and its stored offsets reach the
// input's end, across an injected abort, a commit that fails, and a
// restart on the same store.
func TestNewSinkEndToEnd(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	stores := &sinktest.Stores{}
	reg := &sink.Registry{}
	reg.Register("memory", sinktest.Spec(stores))
	for k, v := range map[string]string{"BROKERS": c.Brokers[0], "GROUP": "g", "INPUT_TOPICS": "in", "SINK": "memory",
		"MEMORY_STORE": "e2e", "COMMIT_INTERVAL": "50ms", "MAX_RECORDS_PER_TXN": "40", "TRANSACTIONAL_ID": "memory-1"} {
		t.Setenv(config.EnvName(k), v)
	}
	cfg, err := config.Load("h")
	if err != nil {
		t.Fatal(err)
	}
	mem := stores.Get("e2e")
	produced := produceInputs(t, c, 0, 200)
	mem.FailNext(1)
	m := runMemorySink(t, reg, cfg, func(seq uint64) bool { return seq == 2 }, func() bool { return storedSum(t, mem) == 200 })
	if n := testutil.ToFloat64(m.Txn.Aborted.WithLabelValues("injected")); n != 1 {
		t.Errorf("aborted{injected} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.Txn.Aborted.WithLabelValues("end_error")); n != 1 {
		t.Errorf("aborted{end_error} = %v, want 1 (the commit that failed)", n)
	}
	for k, v := range produceInputs(t, c, 200, 300) {
		produced[k] = v
	}
	runMemorySink(t, reg, cfg, nil, func() bool { return storedSum(t, mem) == 300 }) // the restart
	seen := map[record.Source]int{}
	for _, r := range mem.Rows() {
		src := r.Source()
		seen[src]++
		if want, ok := produced[src]; !ok || string(r.Value) != want {
			t.Errorf("row of %v holds %q, want %q", src, r.Value, want)
		}
	}
	if len(seen) != len(produced) || len(mem.Rows()) != len(produced) {
		t.Errorf("%d rows of %d inputs, want each of the %d inputs once", len(mem.Rows()), len(seen), len(produced))
	}
	ends := map[int32]int64{}
	for src := range produced {
		ends[src.Partition] = max(ends[src.Partition], src.Offset+1)
	}
	stored, _ := mem.Offsets(context.Background(), nil)
	for p, end := range ends {
		if got := stored[record.TopicPartition{Topic: "in", Partition: p}]; got != end {
			t.Errorf("partition %d: stored next offset %d, want its end %d", p, got, end)
		}
	}
}

// produceInputs produces the values v<from>..v<to-1> to "in" of c, and
// returns each one's source.
func produceInputs(t *testing.T, c *kafkatest.Cluster, from, to int) map[record.Source]string {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		v := fmt.Sprintf("v%d", i)
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(v), Value: []byte(v)})
	}
	out := map[record.Source]string{}
	for _, r := range c.ProduceSync(t, recs) {
		out[record.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}] = string(r.Value)
	}
	return out
}

// storedSum is the sum of the next offsets stored in mem.
func storedSum(t *testing.T, mem *sinktest.Memory) int64 {
	stored, err := mem.Offsets(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, next := range stored {
		n += next
	}
	return n
}

// runMemorySink builds the processor as Main does on the memory sink of
// reg, runs it until done, and stops it.
func runMemorySink(t *testing.T, reg *sink.Registry, cfg *config.Config, inject func(uint64) bool, done func() bool) *Metrics {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	dest, err := chooseSink(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	promReg := prometheus.NewRegistry()
	db, err := dest.open(ctx, cfg.Group, promReg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	chains, err := buildChains(transform.Default, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := Prepare(cfg, chains, log, Overrides{InjectAbort: inject})
	if err != nil {
		t.Fatal(err)
	}
	in, err := pr.build(cfg.Brokers, promReg, reached{db: db})
	if err != nil {
		t.Fatal(err)
	}
	p, m := in.Pipeline, in.Metrics
	ran := make(chan error, 1)
	go func() { ran <- in.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatal("not done after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := p.Status().Sink; got != "memory" {
		t.Errorf("the status page says sink %q, want memory", got)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run = %v", err)
	}
	return m
}
