package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MismatchError says that a changelog topic exists but cannot hold a
// store partitioned like the input: another partition count, or a
// cleanup.policy other than compact (which would delete state). The
// wiring turns it into exit code 2 with its one line; the processor never
// changes the topic.
//
// Another partition count cannot be fixed by deleting the changelog: the
// input's keys moved to other partitions (Kafka's partitioners hash a key
// over the partition count), and nothing reads the input again to rebuild
// the state, so every key would start from nothing. Error says so, and
// the wiring names the ways out: run the chain again under a new group,
// which reads the input from its start, or start empty by deleting
// Changelogs.
type MismatchError struct {
	Topic string
	// Partitions is the topic's partition count; Want the input's.
	Partitions, Want int32
	// Policy is the topic's cleanup.policy.
	Policy string
	// Changelogs are the changelog topics of every store of the group,
	// the ones to delete to start empty.
	Changelogs []string
}

// PartitionsChanged says whether the mismatch is the partition count.
func (e *MismatchError) PartitionsChanged() bool { return e.Partitions != e.Want }

// Error is one line naming the topic, what it has and what it needs.
func (e *MismatchError) Error() string {
	if e.PartitionsChanged() {
		return fmt.Sprintf("state: changelog topic %s has %d partitions, the input %d: the input's keys moved to other partitions "+
			"and the state kept by partition cannot follow them (deleting the changelog would not rebuild it: nothing reads the input again, every key would start from nothing)",
			e.Topic, e.Partitions, e.Want)
	}
	return fmt.Sprintf("state: changelog topic %s has cleanup.policy=%s, want compact: set cleanup.policy=compact on it", e.Topic, e.Policy)
}

// EnsureChangelogs creates the stores' changelog topics that are missing,
// compacted, with partitions partitions (the input's) and the broker's
// replication factor, and checks the ones that exist: it returns a
// *MismatchError for one with another partition count or cleanup.policy.
// Call it once at start, before the first Restore.
func (m *Manager) EnsureChangelogs(ctx context.Context, adm *kadm.Client, partitions int32) error {
	topics := m.Topics()
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("state: reading the changelogs' metadata: %w", err)
	}
	compact := "compact"
	var existing []string
	for _, topic := range topics {
		if d, ok := details[topic]; ok && d.Err == nil {
			existing = append(existing, topic)
			continue
		}
		resp, err := adm.CreateTopic(ctx, partitions, -1, map[string]*string{"cleanup.policy": &compact}, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) { // created meanwhile, by another instance
			existing = append(existing, topic)
			continue
		}
		if err != nil {
			return fmt.Errorf("state: creating changelog %s: %w", topic, err)
		}
		m.mu.Lock()
		m.topicIDs[topic] = resp.ID
		m.mu.Unlock()
		m.log.Info("state changelog created", "topic", topic, "partitions", partitions)
	}
	if len(existing) == 0 {
		return nil
	}
	return m.check(ctx, adm, existing, partitions)
}

// check compares each changelog's partition count and cleanup.policy
// with what the stores need.
func (m *Manager) check(ctx context.Context, adm *kadm.Client, topics []string, partitions int32) error {
	details, err := m.listed(ctx, adm, topics)
	if err != nil {
		return err
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return fmt.Errorf("state: reading the changelogs' configs: %w", err)
	}
	for _, topic := range topics {
		d := details[topic]
		if d.Err != nil {
			return fmt.Errorf("state: changelog %s: %w", topic, d.Err)
		}
		rc, err := configs.On(topic, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return fmt.Errorf("state: reading the configs of changelog %s: %w", topic, err)
		}
		policy := "delete" // Kafka's default, when the broker leaves it out
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		if n := int32(len(d.Partitions)); n != partitions || policy != "compact" {
			return &MismatchError{Topic: topic, Partitions: n, Want: partitions, Policy: policy, Changelogs: m.Topics()}
		}
		m.mu.Lock()
		m.topicIDs[topic] = d.ID
		m.mu.Unlock()
	}
	return nil
}

// listed returns the metadata of topics once it shows them all: the
// brokers learn of a topic just created a moment after its controller,
// and kadm caches metadata for a few seconds.
func (m *Manager) listed(ctx context.Context, adm *kadm.Client, topics []string) (kadm.TopicDetails, error) {
	return listed(ctx, adm, topics)
}

// listed is Manager.listed.
func listed(ctx context.Context, adm *kadm.Client, topics []string) (kadm.TopicDetails, error) {
	deadline := time.Now().Add(metadataWait)
	for {
		details, err := adm.ListTopics(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("state: reading the changelogs' metadata: %w", err)
		}
		missing := ""
		for _, t := range topics {
			if d, ok := details[t]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
				missing = t
			}
		}
		if missing == "" || time.Now().After(deadline) {
			return details, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("state: waiting for changelog %s in the metadata: %w", missing, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// metadataWait bounds how long a changelog just created may stay out of
// the metadata.
const metadataWait = 10 * time.Second

// Partitioner returns a partitioner that sends records of the changelog
// topics to the partition they name, and every other record where base
// sends it. The processor's producer needs it (kgo.RecordPartitioner), or
// kgo.ManualPartitioner for every topic: a changelog record must land in
// the partition of its input.
func Partitioner(base kgo.Partitioner, changelogs []string) kgo.Partitioner {
	set := make(map[string]bool, len(changelogs))
	for _, t := range changelogs {
		set[t] = true
	}
	return partitioner{base: base, manual: kgo.ManualPartitioner(), set: set}
}

type partitioner struct {
	base, manual kgo.Partitioner
	set          map[string]bool
}

// ForTopic implements kgo.Partitioner.
func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.set[topic] {
		return p.manual.ForTopic(topic)
	}
	return p.base.ForTopic(topic)
}
