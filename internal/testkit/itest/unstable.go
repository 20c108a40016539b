package itest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeadTransactionWithOffsets begins a transaction as transactional ID
// group+"-dead", writes one record to out, commits offsets for half of
// topic's partitions' input within it, and abandons it: no EndTxn, ever. It
// returns when the transaction began.
func (tg *Target) DeadTransactionWithOffsets(t *testing.T, group, topic, out string, timeout time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txnID := group + "-dead"
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.TransactionalID(txnID), kgo.TransactionTimeout(timeout),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close) // only after the test: closing must not end the transaction first
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: out, Key: []byte("dead"), Value: []byte("dead:0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
	addResp, err := add.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("AddOffsetsToTxn: %v", err)
	}

	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = txnID, group, pid, epoch
	commit.Generation, commit.MemberID = -1, ""
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = topic
	topics, err := tg.Admin(t).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ct.TopicID = topics[topic].ID // newer versions name topics by ID
	for p := int32(0); p < 3; p++ {
		cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch = p, 1000, -1 // would skip 1000 records a partition, were it committed
		ct.Partitions = append(ct.Partitions, cp)
	}
	commit.Topics = append(commit.Topics, ct)
	commitResp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	for _, rt := range commitResp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("TxnOffsetCommit partition %d: %v", rp.Partition, err)
			}
		}
	}
	return began
}
