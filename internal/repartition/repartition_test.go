package repartition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// A group is caught up on a partition of its repartition topics with
// records only when no transaction is open there and the committed offset
// is at least the last transaction's marker's; topics of other groups do
// not count, nor topics of the group that are no repartition topics.
func TestRepartitionCaughtUp(t *testing.T) {
	kafkatest.ForEach(t, []kfake.Opt{kfake.NumBrokers(1)}, testRepartitionCaughtUp)
}

func testRepartitionCaughtUp(t *testing.T, c *kafkatest.Cluster) {
	group := kafkatest.Unique("rp")
	topic, otherTopic := group+"-aggregate-repartition", kafkatest.Unique("rp-other")+"-aggregate-repartition"
	changelog := group + "-aggregate-changelog"
	adm := c.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caughtUp := func(what string, want bool) {
		t.Helper()
		committed, err := adm.FetchOffsets(ctx, group)
		// A broker just started may still be loading its group
		// coordinator (COORDINATOR_NOT_AVAILABLE, retriable).
		for kerr.IsRetriable(err) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			committed, err = adm.FetchOffsets(ctx, group)
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			committed = nil // nothing committed yet
		} else if err != nil {
			t.Fatal(err)
		}
		got, err := CaughtUp(ctx, adm, group, committed)
		if err != nil || got != want {
			t.Errorf("%s: caught up %v, %v; want %v", what, got, err, want)
		}
	}
	commit := func(p int32, at int64) {
		t.Helper()
		offs := kadm.Offsets{}
		offs.AddOffset(topic, p, at, -1)
		if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp("no repartition topic", true)
	c.CreateTopics(t, 2, nil, topic, otherTopic, changelog)
	caughtUp("empty", true)
	if got, err := Topics(ctx, adm, group); err != nil || len(got) != 1 || got[0] != topic {
		t.Errorf("Topics(%s) = %q, %v; want [%s]", group, got, err, topic)
	}

	// Three records and a commit marker in partition 0 (offsets 0-3).
	cl := c.Client(t, kgo.TransactionalID(group+"-hop"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	write := func(p int32, end bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if end {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, true)
	caughtUp("nothing committed", false)
	commit(0, 2)
	caughtUp("the last record not consumed", false)
	commit(0, 3)
	caughtUp("committed up to the marker", true)
	commit(0, 4)
	caughtUp("committed past the marker", true)

	// Another group's repartition topic, and a topic of the group that is
	// no repartition topic, are not the group's hop.
	other := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, tp := range []string{otherTopic, changelog} {
		if err := other.ProduceSync(ctx, &kgo.Record{Topic: tp, Partition: 1, Value: []byte("y")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp("another group's records, the group's changelog", true)

	// An open transaction in partition 1: not caught up whatever is
	// committed.
	write(1, false)
	commit(1, 3)
	caughtUp("a transaction open", false)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	caughtUp("the transaction committed", true)
}
