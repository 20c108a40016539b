package memkafka

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

func offsets(fs kgo.Fetches) []int64 {
	var out []int64
	fs.EachRecord(func(r *kgo.Record) { out = append(out, r.Offset) })
	return out
}

// A log that skips offsets is polled from the position on, across the
// gap; an abort rewinds to the committed offsets and drops the
// transaction's outputs; a commit keeps them with their inputs; an output
// to a topic the cluster lacks fails until topics are created on demand.
func TestSessionPollEndAndOutputs(t *testing.T) {
	c := NewCluster(nil)
	c.Create("in", 1, 0)
	for _, off := range []int64{0, 5, 0} { // 0, then 5, then the end: 6
		if err := c.Append(&kgo.Record{Topic: "in", Offset: off, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Append(&kgo.Record{Topic: "in", Partition: 1}); err == nil {
		t.Error("a record of a partition the topic lacks was stored")
	}
	s := NewSession(c, "g", "g-1", []string{"in"}, txn.NewMetrics(prometheus.NewRegistry()))
	s.KeepCommitted()
	ctx := context.Background()
	if err := s.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if got := offsets(s.Poll(ctx, 2)); len(got) != 2 || got[0] != 0 || got[1] != 5 {
		t.Fatalf("first poll %v, want [0 5]", got)
	}
	_ = s.Begin(ctx)
	src := transform.Source{Topic: "in", Offset: 5}
	s.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("x")}, src)
	if f := s.TakeFailures(); len(f) != 1 || f[0].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("failures %v, want the unknown topic out", f)
	}
	if ok, _ := s.End(ctx, 2, ""); ok {
		t.Fatal("a transaction with a failed output committed")
	}
	if got := offsets(s.Poll(ctx, 10)); len(got) != 3 || got[0] != 0 || got[2] != 6 {
		t.Fatalf("poll after the abort %v, want [0 5 6]", got)
	}
	c.AutoCreate()
	_ = s.Begin(ctx)
	s.ProduceDeadLetter(ctx, &kgo.Record{Topic: "dlq", Value: []byte("d")}, src, txn.DeadLetter{Stage: "s"})
	if ok, _ := s.End(ctx, 3, ""); !ok {
		t.Fatalf("the transaction did not commit: %v", s.TakeFailures())
	}
	kept := s.TakeCommitted()
	if len(kept) != 1 || kept[0].Source != src || kept[0].DeadLetter == nil || kept[0].DeadLetter.Stage != "s" {
		t.Fatalf("kept %+v, want the dead letter of offset 5", kept)
	}
	if got := c.Committed("g", "in")[0]; got != 7 {
		t.Errorf("committed offset %d, want 7", got)
	}
	if n := len(c.Read("dlq", true)); n != 1 {
		t.Errorf("%d committed dead letters, want 1", n)
	}
	// A poll with nothing to read says it waits, until its context ends.
	pctx, cancel := context.WithCancel(ctx)
	go func() {
		for !s.Waiting() {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if fs := s.Poll(pctx, 10); fs.NumRecords() != 0 {
		t.Error("a poll with nothing to read returned records")
	}
	if s.Waiting() {
		t.Error("the session still waits after its poll returned")
	}
}
