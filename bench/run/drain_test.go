package main

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeBroker is a broker on a kfake cluster of one node, over TCP.
func fakeBroker(t *testing.T) *broker {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &broker{addrs: c.ListenAddrs(), cl: cl, adm: kadm.NewClient(cl)}
}

// commit commits the group's offset at on partition 0 of topic.
func commit(t *testing.T, b *broker, group, topic string, at int64) {
	t.Helper()
	var os kadm.Offsets
	os.AddOffset(topic, 0, at, -1)
	resp, err := b.adm.CommitOffsets(context.Background(), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("committing %s@%d: %v", topic, at, err)
	}
}

// A stateful row has drained when its input's offsets reach the end and
// its group has consumed every record of its repartition topics: an open
// transaction on the hop, or a committed offset short of the last
// record, is not drained; another group's hop, or a topic of the group
// that is not a hop, does not count.
func TestDrainedWaitsForTheHop(t *testing.T) {
	ctx := context.Background()
	b := fakeBroker(t)
	const group = "bench-1-g"
	in, hop := group+"-in", group+"-aggregate-repartition"
	if err := b.createTopics(ctx, 1, in, hop, group+"-out", "bench-1-other-aggregate-repartition"); err != nil {
		t.Fatal(err)
	}
	sys, _ := systemByKey("aggregate")
	s := &runSpec{sys: sys, group: group, in: &input{topic: in, records: 3, ends: map[int32]int64{0: 3}}}
	check := func(want bool, why string) {
		t.Helper()
		got, err := drained(ctx, b, s)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: drained %v, want %v", why, got, want)
		}
	}
	commit(t, b, group, in, 2)
	check(false, "the input's last record not consumed")
	commit(t, b, group, in, 3)
	check(true, "the input consumed, the hop empty")

	pr, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.TransactionalID("hop-writer"), kgo.DefaultProduceTopic(hop))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, b, group, hop, 3)
	check(false, "a transaction open on the hop")
	if err := pr.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// Records at 0..2, the commit marker at 3: the end offset is 4.
	commit(t, b, group, hop, 2)
	check(false, "the hop's last record not consumed")
	commit(t, b, group, hop, 3)
	check(true, "the hop consumed up to its commit marker")

	other := &kgo.Record{Topic: "bench-1-other-aggregate-repartition", Value: []byte("y")}
	if err := b.cl.ProduceSync(ctx, other).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := b.cl.ProduceSync(ctx, &kgo.Record{Topic: group + "-out", Value: []byte("z")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	check(true, "another group's hop and the group's output hold records")

	topics := b.withInternal(ctx, group, []string{group + "-out", in})
	want := map[string]bool{group + "-out": true, in: true, hop: true}
	if len(topics) != len(want) {
		t.Errorf("the run's topics are %v", topics)
	}
	for _, tp := range topics {
		if !want[tp] {
			t.Errorf("the run's topics include %s: %v", tp, topics)
		}
	}
}
