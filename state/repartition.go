package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// RepartitionTopic is the repartition topic of a chain whose stateful
// stage keeps store by something other than the input's partitioning
// key: <group>-<store>-repartition.
func RepartitionTopic(group, store string) string {
	return group + "-" + store + "-repartition"
}

// RepartitionMismatchError is a repartition topic that exists with
// another partition count than the stores need, or a compacted one (a
// compacted repartition topic would drop records of one group key that
// were not consumed yet).
type RepartitionMismatchError struct {
	Topic            string
	Partitions, Want int32
	Policy           string
}

// Error is one line naming the topic, what it has and what it needs.
func (e *RepartitionMismatchError) Error() string {
	if e.Partitions != e.Want {
		return fmt.Sprintf("state: repartition topic %s has %d partitions, the input %d: the state kept by its partitions cannot follow "+
			"the group keys to other partitions; start the chain again under a new PROCESSOR_GROUP, or delete the repartition topic and "+
			"its stores' changelogs to start empty", e.Topic, e.Partitions, e.Want)
	}
	return fmt.Sprintf("state: repartition topic %s has cleanup.policy=%s, want delete (its consumed records are purged): set cleanup.policy=delete on it",
		e.Topic, e.Policy)
}

// EnsureRepartition creates the repartition topic when it is missing,
// with partitions partitions, cleanup.policy=delete and retention.ms=-1
// (the processor deletes its records once they are consumed and
// committed), and checks one that exists: a *RepartitionMismatchError for
// another partition count or a compact policy.
func EnsureRepartition(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	del, forever := "delete", "-1"
	resp, err := adm.CreateTopic(ctx, partitions, -1, map[string]*string{"cleanup.policy": &del, "retention.ms": &forever}, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		// Visible in the metadata before the loop requires it.
		if _, err := listed(ctx, adm, []string{topic}); err != nil {
			return err
		}
		return nil
	case !errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("state: creating the repartition topic %s: %w", topic, err)
	}
	details, err := listed(ctx, adm, []string{topic})
	if err != nil {
		return err
	}
	d := details[topic]
	if d.Err != nil {
		return fmt.Errorf("state: repartition topic %s: %w", topic, d.Err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("state: reading the configs of the repartition topic %s: %w", topic, err)
	}
	rc, err := configs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("state: reading the configs of the repartition topic %s: %w", topic, err)
	}
	policy := "delete"
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	if n := int32(len(d.Partitions)); n != partitions || policy != "delete" {
		return &RepartitionMismatchError{Topic: topic, Partitions: n, Want: partitions, Policy: policy}
	}
	return nil
}
