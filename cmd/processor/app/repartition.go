package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
)

// hopTopic returns the repartition topic of chain's hop
// (transform.Chain.Hop), <group>-<store>-repartition with the hop stage's
// first store; ok is false when the chain needs no hop.
func hopTopic(group string, chain *transform.Chain) (topic string, ok bool) {
	at, _, ok := chain.Hop()
	if !ok {
		return "", false
	}
	return state.RepartitionTopic(group, chain.Stores()[len(chain.StoresBefore(at))]), true
}

// openRepartition ensures the repartition topic of a chain that needs a
// hop, with the largest input partition count (the stores' changelogs
// have as many), and returns the pipeline's Repartition, whose Purge
// deletes the consumed records through a client that close closes; nil
// for a chain without a hop. An existing topic that does not match is a
// *state.RepartitionMismatchError.
func openRepartition(ctx context.Context, cfg *config.Config, conn kafkaConn, chain *transform.Chain) (rp *pipeline.Repartition, close func(), err error) {
	topic, ok := hopTopic(cfg.Group, chain)
	if !ok {
		return nil, func() {}, nil
	}
	adm, err := conn.admin()
	if err != nil {
		return nil, nil, fmt.Errorf("creating the repartition topic's admin client: %w", err)
	}
	n, err := inputPartitions(ctx, adm, cfg.InputTopics)
	if err == nil {
		err = state.EnsureRepartition(ctx, adm, topic, n)
	}
	if err != nil {
		adm.Close()
		return nil, nil, err
	}
	purge := func(ctx context.Context, before map[int32]int64) error {
		offs := kadm.Offsets{}
		for p, o := range before {
			offs.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
		}
		resp, err := adm.DeleteRecords(ctx, offs)
		if err != nil {
			return err
		}
		return resp.Error()
	}
	return &pipeline.Repartition{Topic: topic, Partitions: n, Purge: purge, PurgeInterval: cfg.RepartitionPurgeInterval}, adm.Close, nil
}

// inputPartitions returns the largest partition count of the topics.
func inputPartitions(ctx context.Context, adm *kadm.Client, topics []string) (int32, error) {
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("reading the input topics %s: %w", strings.Join(topics, ","), err)
	}
	var n int32
	for _, in := range topics {
		t, ok := td[in]
		if !ok || t.Err != nil {
			return 0, fmt.Errorf("reading the input topic %s: %v", in, t.Err)
		}
		n = max(n, int32(len(t.Partitions)))
	}
	return n, nil
}

// withHop adds the repartition topic rp to the topics the session
// consumes and the loop treats as inputs.
func withHop(inputs []string, rp *pipeline.Repartition) []string {
	return append(slices.Clip(inputs), rp.Topic)
}
