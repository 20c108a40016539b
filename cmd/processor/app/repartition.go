package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
)

// hopTopic returns the repartition topic of chain's hop
// (transform.Chain.Hop), <group>-<store>-repartition with the hop stage's
// first store, its index in the chain and whether a stage before it
// keeps state; ok is false when the chain needs no hop.
func hopTopic(group string, chain *transform.Chain) (topic string, at int, storesBefore bool, ok bool) {
	at, _, ok = chain.Hop()
	if !ok {
		return "", 0, false, false
	}
	before := chain.StoresBefore(at)
	return state.RepartitionTopic(group, chain.Stores()[len(before)]), at, len(before) > 0, true
}

// checkHop refuses a chain that would need a second repartition hop: a
// stateful stage after the hop stage that keeps state by yet another key.
func checkHop(cfg *config.Config, chain *transform.Chain) error {
	at, e, ok := chain.Hop()
	if !ok {
		return nil
	}
	if em, ok := chain.EmitterFrom(at); ok {
		// A plugin's closed entry names its input by offset only: behind
		// the hop, a repartition record's, not the original input's.
		if name, value, own := chain.CloseSettingFrom(at); own {
			return &settings.Error{Var: PluginVar(em.Plugin(), name), Value: value,
				Want: settings.Say("unset for " + em.String() + ", which runs after " + e.String() + " repartitions the records: emitting on close needs no hop in this release")}
		}
	}
	later, ok := chain.AfterHop(at)
	if !ok {
		return nil
	}
	return &settings.Error{Var: config.EnvName("TRANSFORMS"), Value: strings.Join(cfg.Transforms, ","),
		Want: settings.Say("at most one repartition hop: " + later.String() + " keeps state after " + e.String() +
			", which repartitions the records by its own group key; run " + later.String() +
			" in a second processor that reads this one's output, or set " + PluginVar(later.Plugin(), "PARTITIONED_BY_KEY") +
			"=true if its records of one group key all share one of " + e.String() + "'s")}
}

// openRepartition ensures the repartition topic of a chain that needs a
// hop, with the largest input partition count (the stores' changelogs
// have as many), and returns the pipeline's Repartition, whose Purge
// deletes the consumed records through a client that close closes; nil
// for a chain without a hop. An existing topic that does not match is a
// *state.RepartitionMismatchError.
func openRepartition(ctx context.Context, cfg *config.Config, conn []kgo.Opt, chain *transform.Chain) (rp *pipeline.Repartition, close func(), err error) {
	topic, _, _, ok := hopTopic(cfg.Group, chain)
	if !ok {
		return nil, func() {}, nil
	}
	cl, err := kgo.NewClient(conn...)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the repartition topic's admin client: %w", err)
	}
	adm := kadm.NewClient(cl)
	n, err := inputPartitions(ctx, adm, cfg.InputTopics)
	if err == nil {
		err = state.EnsureRepartition(ctx, adm, topic, n)
	}
	if err != nil {
		cl.Close()
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
	return &pipeline.Repartition{Topic: topic, Partitions: n, Purge: purge, PurgeInterval: cfg.RepartitionPurgeInterval}, cl.Close, nil
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
