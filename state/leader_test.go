package state

import (
	"context"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// TestRestoreLeaderMoved: the leader of a partition moves between a
// restore's plan and its reading (kfake, three brokers): the first fetch
// is refused by the old leader, the restore looks the leader up again
// and reads the partition to its end from the new one.
func TestRestoreLeaderMoved(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(3))
	r := newRig(t, c, 2, nil)
	m := r.open()
	for p := range r.parts {
		r.commit(m, p, keys("a", 50, "1"))
	}
	_ = m.Close()
	if err := os.RemoveAll(r.dir); err != nil {
		t.Fatal(err)
	}
	for p := range r.parts {
		r.behind(p, keys("b", 50, "2"), true)
	}
	m = r.manager()
	cl := r.c.Client(t)
	plan, err := m.plan(ctx(t), kadm.NewClient(cl), m.Topics(), r.all())
	if err != nil {
		t.Fatal(err)
	}
	for p := range r.parts {
		old := c.Fake.LeaderFor(r.topic, p)
		if err := c.Fake.MoveTopicPartition(r.topic, p, (old+1)%3); err != nil {
			t.Fatal(err)
		}
		if plan[part{r.topic, p}].leader != old {
			t.Fatalf("partition %d planned on broker %d, its leader was %d", p, plan[part{r.topic, p}].leader, old)
		}
	}
	c2, cancel := context.WithTimeout(context.Background(), restoreBound)
	defer cancel()
	if err := m.read(c2, cl, plan); err != nil {
		t.Fatal(err)
	}
	m.finish(plan, 0)
	for p := range r.parts {
		if got, want := plan[part{r.topic, p}].leader, c.Fake.LeaderFor(r.topic, p); got != want {
			t.Errorf("partition %d read from broker %d, its leader is %d", p, got, want)
		}
		r.check(m, p, 0)
	}
}
