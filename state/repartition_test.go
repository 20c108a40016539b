package state

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// RestoreStores and RevokeStores touch only the stores named: with a
// repartition hop, the stores on each side follow their own topic's
// assignment. A store revoked alone refuses transactions while the other
// keeps its state.
func TestRestoreStoresAlone(t *testing.T) {
	e := newEnv(t, 2)
	m := e.open()
	e.txn(m, true, func(tx *Txn) {
		put(t, store(t, tx, "counts", 0), "a", "1")
		put(t, store(t, tx, "seen", 1), "b", "2")
	})
	m.RevokeStores([]string{"seen"}, []int32{0, 1})
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Store("seen", 1); !errors.Is(err, ErrNotRestored) {
		t.Errorf("a revoked store: %v, want ErrNotRestored", err)
	}
	if _, err := tx.Store("counts", 0); err != nil {
		t.Errorf("the store not revoked: %v", err)
	}
	tx.Abort()
	if err := m.RestoreStores(ctx(t), []string{"seen"}, []int32{1}); err != nil {
		t.Fatal(err)
	}
	want(t, m, "seen", 1, "b", "2")
	want(t, m, "counts", 0, "a", "1")
	if err := m.RestoreStores(ctx(t), []string{"nope"}, []int32{1}); !errors.Is(err, ErrUnknownStore) {
		t.Errorf("an unknown store: %v, want ErrUnknownStore", err)
	}
}

// The repartition topic is created with the partitions asked, a delete
// policy and unlimited retention; it is accepted as it is on the next
// start, and refused with another partition count or a compact policy.
func TestEnsureRepartition(t *testing.T) {
	e := newEnv(t, 3)
	adm := kadm.NewClient(e.c.Client(t))
	topic := RepartitionTopic("g", "counts")
	if topic != "g-counts-repartition" {
		t.Fatalf("topic %s", topic)
	}
	if err := EnsureRepartition(ctx(t), adm, topic, 3); err != nil {
		t.Fatal(err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc[0].Configs {
		if c.Value != nil {
			got[c.Key] = *c.Value
		}
	}
	if got["cleanup.policy"] != "delete" || got["retention.ms"] != "-1" {
		t.Errorf("configs %v, want cleanup.policy=delete retention.ms=-1", got)
	}
	if err := EnsureRepartition(ctx(t), kadm.NewClient(e.c.Client(t)), topic, 3); err != nil {
		t.Errorf("the topic as made: %v", err)
	}
	var mm *RepartitionMismatchError
	if err := EnsureRepartition(ctx(t), kadm.NewClient(e.c.Client(t)), topic, 4); !errors.As(err, &mm) || mm.Partitions != 3 || mm.Want != 4 {
		t.Errorf("another count: %v", err)
	}
	compact := "compact"
	other := RepartitionTopic("g", "other")
	if _, err := adm.CreateTopic(ctx(t), 3, -1, map[string]*string{"cleanup.policy": &compact}, other); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRepartition(ctx(t), kadm.NewClient(e.c.Client(t)), other, 3); !errors.As(err, &mm) || mm.Policy != "compact" {
		t.Errorf("a compacted one: %v", err)
	}
}
