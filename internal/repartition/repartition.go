// Package repartition tells, from outside a running processor, whether
// its consumer group has consumed every record of its repartition topics
// (<group>-...-repartition: the processor's, <group>-<store>-repartition,
// and Kafka Streams' alike). The tools that wait for a stateful run to
// drain (the benchmarks, the chaos drill) ask it: such a run's input
// offsets are committed as soon as its records are written to the hop,
// so the input alone says nothing about the records still crossing it.
package repartition

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Topics returns the repartition topics of group that exist, sorted.
func Topics(ctx context.Context, adm *kadm.Client, group string) ([]string, error) {
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tds.Sorted() {
		if strings.HasPrefix(t.Topic, group+"-") && strings.HasSuffix(t.Topic, "-repartition") {
			out = append(out, t.Topic)
		}
	}
	return out, nil
}

// CaughtUp reports whether group, whose committed offsets are committed,
// has consumed every record of its repartition topics: on each partition
// with records, no transaction open (the last stable offset is the log
// end) and the committed offset at least the last record's, which is the
// marker of the last transaction (read past, never committed past). A
// group without a repartition topic is caught up.
func CaughtUp(ctx context.Context, adm *kadm.Client, group string, committed kadm.OffsetResponses) (bool, error) {
	topics, err := Topics(ctx, adm, group)
	if err != nil || len(topics) == 0 {
		return err == nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return false, err
	}
	stable, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return false, err
	}
	done := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			done = false
			return
		}
		if o.Offset == 0 {
			return
		}
		s, ok := stable.Lookup(o.Topic, o.Partition)
		c, cok := committed.Lookup(o.Topic, o.Partition)
		if !ok || s.Err != nil || s.Offset < o.Offset || !cok || c.Err != nil || c.At < o.Offset-1 {
			done = false
		}
	})
	return done, nil
}
