package pipeline

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// suspectSession is a session in memory that counts crash attempts the
// way txn.Session reports them (crashWatch): from its first poll on, as
// if an assignment that came while the poll waited had found a partition
// suspect and, in its metadata, the culprit, it asks for one record per
// transaction and hands the culprit over once.
type suspectSession struct {
	*memkafka.Session
	culprit   txn.Culprit
	solo      atomic.Bool
	taken     bool
	oversized int // polls asked for more than one record while solo
}

func (s *suspectSession) Poll(ctx context.Context, max int) kgo.Fetches {
	if s.solo.Load() && max > 1 {
		s.oversized++
	}
	fs := s.Session.Poll(ctx, max)
	s.solo.Store(true)
	return fs
}

func (s *suspectSession) Solo() bool { return s.solo.Load() }

func (s *suspectSession) Attempt(context.Context, kgo.Fetches) {}

func (s *suspectSession) TakeCulprits() []txn.Culprit {
	if s.taken || !s.solo.Load() {
		return nil
	}
	s.taken = true
	return []txn.Culprit{s.culprit}
}

// While the session suspects a record of killing the process, the loop
// runs one record per transaction (a poll that brought more is rewound,
// not run), and fails the culprit under the policy without running it:
// its dead letter says the process died on it, and every other input is
// output exactly once.
func TestLoopCrashCulprit(t *testing.T) {
	e := newMemEnv(t)
	e.produce(30, 3)
	bad := e.inputs[17]
	s := &suspectSession{Session: newMemSession(e.mem, "g", "g-a", e.in, txn.NewMetrics(prometheus.NewRegistry())),
		culprit: txn.Culprit{Topic: bad.Topic, Partition: bad.Partition, Offset: bad.Offset, Crashes: 4}}
	var ranBad atomic.Bool
	chain := loopChain(t, func(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if string(r.Value) == string(bad.Value) {
			ranBad.Store(true)
		}
		return passThrough(ctx, src, r, out)
	})
	pm := NewMetrics(prometheus.NewRegistry())
	p, err := New(chain, Options{OutputTopic: e.out, InputTopics: []string{e.in}, CommitInterval: time.Second, MaxRecordsPerTxn: 100,
		OnError: DeadLetter, DLQTopic: e.dlq, Lineage: true, Metrics: pm, SettingName: envSettingName, Logger: loopLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, s, s) }()
	eventually(t, 30*time.Second, "every input committed", nil, func() bool { return e.caughtUp("g") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	e.checkTopic(e.out, e.read(e.out, true), func(in *kgo.Record) bool { return in != bad })
	dead := e.read(e.dlq, true)
	if len(dead) != 1 || string(dead[0].Value) != string(bad.Value) {
		t.Fatalf("dead letters %v, want the culprit once", dead)
	}
	h := map[string]string{}
	for _, x := range dead[0].Headers {
		h[x.Key] = string(x.Value)
	}
	if h[record.HeaderErrorTransform] != "crash" || h[record.HeaderErrorAttempts] != "4" ||
		!strings.Contains(h[record.HeaderError], "died 4 times") || !strings.Contains(h[record.HeaderError], "PROCESSOR_MAX_CRASH_ATTEMPTS") {
		t.Errorf("dead letter headers %q, want transform crash, 4 attempts, and an error naming the setting", h)
	}
	if ranBad.Load() {
		t.Error("the culprit ran")
	}
	if s.oversized > 0 {
		t.Errorf("%d polls asked for more than one record while solo", s.oversized)
	}
	if n := testutil.ToFloat64(s.Metrics().Aborted.WithLabelValues(string(txn.ReasonRebalance))); n != 1 {
		t.Errorf("%v rewinds of a poll that brought more than one record, want 1 (the first poll)", n)
	}
	if c, d := testutil.ToFloat64(pm.Crashed), testutil.ToFloat64(pm.DLQ); c != 1 || d != 1 {
		t.Errorf("processor_records_crashed_total %v, processor_records_dlq_total %v, want 1 and 1", c, d)
	}
	if n := testutil.ToFloat64(s.Metrics().Committed); n != 30 {
		t.Errorf("%v transactions committed, want 30: one per record", n)
	}
}
