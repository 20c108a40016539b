package itest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceLagInput writes in's records, record i to partition i%parts:
// idempotently when perTxn is 0, else in committed transactions of perTxn
// records by one transactional producer.
func (tg *Target) ProduceLagInput(t testing.TB, in Input, parts int32, perTxn int) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(tg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(250 * time.Millisecond)} // see kafka/README.md: prompt retries of CONCURRENT_TRANSACTIONS
	if perTxn > 0 {
		opts = append(opts, kgo.TransactionalID(Unique("lag-upstream")))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := Context(t, ProduceTimeout)
	batch := func(from, to int) []*kgo.Record {
		rs := make([]*kgo.Record, 0, to-from)
		for i := from; i < to; i++ {
			r := in.Record(i)
			r.Partition = int32(i) % parts
			rs = append(rs, r)
		}
		return rs
	}
	if perTxn == 0 {
		if err := cl.ProduceSync(ctx, batch(0, in.N)...).FirstErr(); err != nil {
			t.Fatalf("producing %s: %v", in.Topic, err)
		}
		return
	}
	for from := 0; from < in.N; from += perTxn {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, batch(from, min(from+perTxn, in.N))...).FirstErr(); err != nil {
			t.Fatalf("producing %s records [%d, %d) in a transaction: %v", in.Topic, from, from+perTxn, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("committing the transaction of %s records [%d, %d): %v", in.Topic, from, from+perTxn, err)
		}
	}
}

// OpenUpstreamTransaction begins a transaction, writes n records to
// partition p of topic in it, and leaves it open; the caller ends it
// (closing the client at the test's end aborts it otherwise). Its timeout
// is timeout, the processor's, so that the broker does not abort it while
// the processor is held (franz-go's default is 40s).
func (tg *Target) OpenUpstreamTransaction(t testing.TB, topic string, p int32, n int, timeout time.Duration) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.TransactionalID(Unique("lag-open")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(250*time.Millisecond), kgo.TransactionTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx := Context(t, ProduceTimeout)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("open-upstream-" + strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing into the open upstream transaction: %v", err)
		}
	}
	return cl
}

// KafkaOffsets are one partition's offsets as Kafka reports them (kadm).
type KafkaOffsets struct {
	LogEnd     int64 // high watermark: ListOffsets latest, read_uncommitted
	LastStable int64 // ListOffsets latest, read_committed
	Committed  int64 // the group's committed offset (OffsetFetch); -1 if none
}

// KafkaView reads topic's offsets and group's committed offsets with kadm.
func (tg *Target) KafkaView(t testing.TB, group, topic string) (map[int32]KafkaOffsets, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := tg.Admin(t)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing last stable offsets: %w", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) { // kfake, before the group's first join; Kafka answers with no offsets
		committed, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the group's offsets: %w", err)
	}
	out := map[int32]KafkaOffsets{}
	ends.Each(func(o kadm.ListedOffset) {
		k := KafkaOffsets{LogEnd: o.Offset, LastStable: -1, Committed: -1}
		if s, ok := stable.Lookup(topic, o.Partition); ok {
			k.LastStable = s.Offset
		}
		if c, ok := committed.Lookup(topic, o.Partition); ok && c.At >= 0 {
			k.Committed = c.At
		}
		out[o.Partition] = k
	})
	return out, nil
}

// Assignment returns the partitions of topic that the broker has assigned
// each member of group, by member ID, once the group is stable.
func (tg *Target) Assignment(t testing.TB, group, topic string) (map[string][]int32, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described, err := tg.Admin(t).DescribeGroups(ctx, group)
	if err == nil {
		err = described.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("describing the group: %w", err)
	}
	g, ok := described[group]
	if !ok || g.State != "Stable" {
		return nil, fmt.Errorf("group %s is %q, not Stable", group, g.State)
	}
	out := map[string][]int32{}
	for _, m := range g.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok {
			return nil, fmt.Errorf("member %s has no consumer assignment", m.MemberID)
		}
		var ps []int32
		for _, at := range c.Topics {
			if at.Topic == topic {
				ps = append(ps, at.Partitions...)
			}
		}
		slices.Sort(ps)
		out[m.MemberID] = ps
	}
	return out, nil
}
