package kafkatest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The harness against a kfake cluster: topics created with their configs,
// records written and read back with either isolation (an aborted
// transaction's records only read_uncommitted), end offsets, and a
// group's committed offsets before and after it commits.
func TestHarness(t *testing.T) {
	c := NewFake(t, kfake.NumBrokers(1))
	topic := Unique("harness")
	c.CreateTopics(t, 2, map[string]string{"max.message.bytes": "20000"}, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfgs, err := c.Admin(t).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := cfgs.On(topic, nil); err != nil || !strings.Contains(formatConfigs(rc), "max.message.bytes=20000") {
		t.Errorf("the topic's configs %s (%v), want max.message.bytes=20000", formatConfigs(rc), err)
	}

	recs := []*kgo.Record{{Value: []byte("a"), Partition: 0}, {Value: []byte("b"), Partition: 1}, {Value: []byte("c"), Partition: 1}}
	for _, r := range recs {
		r.Topic = topic
	}
	c.ProduceSync(t, recs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if recs[2].Offset != 1 {
		t.Errorf("the third record's offset = %d, want 1", recs[2].Offset)
	}

	tx := c.Client(t, kgo.TransactionalID(Unique("harness-txn")), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	if ends := c.EndOffsets(t, topic); ends[0] != 3 || ends[1] != 2 { // a, the aborted record and its marker; b, c
		t.Errorf("end offsets %v, want 3 and 2", ends)
	}
	if got := len(c.ReadAll(t, topic, true)); got != 3 {
		t.Errorf("read_committed read %d records, want 3", got)
	}
	if got := len(c.ReadAll(t, topic, false)); got != 4 {
		t.Errorf("read_uncommitted read %d records, want 4", got)
	}

	group := Unique("harness-group")
	if m := c.Committed(t, group, topic); len(m) != 0 {
		t.Errorf("a group that committed nothing has offsets %v", m)
	}
	if ok, behind := c.CaughtUp(t, group, topic); ok || behind == "" {
		t.Errorf("CaughtUp = %v, %q before any commit", ok, behind)
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: topic, Partition: 1, At: 2, LeaderEpoch: -1})
	if err := c.Admin(t).CommitAllOffsets(ctx, group, offsets); err != nil {
		t.Fatal(err)
	}
	if m := c.Committed(t, group, topic); m[0] != 3 || m[1] != 2 {
		t.Errorf("committed %v, want 3 and 2", m)
	}
	if ok, behind := c.CaughtUp(t, group, topic); !ok {
		t.Errorf("not caught up at the end offsets: %s", behind)
	}
}

func formatConfigs(rc kadm.ResourceConfig) string {
	var b strings.Builder
	for _, c := range rc.Configs {
		b.WriteString(c.Key + "=" + c.MaybeValue() + " ")
	}
	return b.String()
}

// Unique names differ.
func TestUnique(t *testing.T) {
	if a, b := Unique("x"), Unique("x"); a == b || !strings.HasPrefix(a, "x-") {
		t.Errorf("Unique gave %q and %q", a, b)
	}
}
