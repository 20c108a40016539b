package integration

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An instance that died after sending its offsets in a transaction but
// before ending it leaves pending offsets in the group. A new instance with
// another transactional ID cannot abort that transaction; its offset fetch
// is answered UNSTABLE_OFFSET_COMMIT until the transaction times out, and
// only then does it start, from the last committed offsets (the dead
// transaction's offsets were aborted with it). Nothing is skipped, nothing
// doubled, and the dead transaction's output stays invisible.
func TestPendingOffsetsOfDeadTransaction(t *testing.T) {
	t.Parallel()
	ForEachTarget(t, func(t *testing.T, tg *Target) {
		in := Input{Topic: Unique("pending-in"), N: 6000, Keys: 60}
		out, group := Unique("pending-out"), Unique("pending-group")
		tg.NewTopics(t, 3, in.Topic, out)
		tg.Produce(t, in, 0, in.N)

		const deadTimeout = 6 * time.Second
		died := tg.DeadTransactionWithOffsets(t, group, in.Topic, out, deadTimeout)

		a := tg.Start(t, InstanceOpts{Group: group, TxnID: group + "-new", Topics: []string{in.Topic}, Out: out})
		WaitFor(t, 60*time.Second, "a first commit", func() bool { return a.Pipeline.Stats().Commits > 0 })
		waited := time.Since(died)
		tg.WaitCaughtUp(t, group, in.Topic, a)
		a.Stop(t)
		t.Logf("%s: first commit %s after the transaction died (its timeout %s)", tg.Name, waited.Round(10*time.Millisecond), deadTimeout)
		if waited < deadTimeout/2 {
			t.Errorf("the new instance committed %s after the dead transaction began, before it could have timed out (%s)", waited, deadTimeout)
		}
		CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}

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
