package main

import (
	"context"
	"fmt"
	"time"
)

// preloadInputs creates one input topic per record size and fills it,
// and when an Avro row runs, its Avro twin; each topic created is added
// to created, for the cleanup.
func preloadInputs(ctx context.Context, o options, env *environment, b *broker, prefix string, created *[]string) (map[int]*input, error) {
	inputs := map[int]*input{}
	for _, size := range o.sizes {
		in := &input{topic: fmt.Sprintf("%s-in-%d", prefix, size), size: size, records: o.records}
		if err := preloadOne(ctx, o.partitions, b, in, created); err != nil {
			return nil, err
		}
		if needsAvro(o) {
			av, err := avroInput(ctx, env, in)
			if err != nil {
				return nil, err
			}
			if err := preloadOne(ctx, o.partitions, b, av, created); err != nil {
				return nil, err
			}
			in.avro = av
		}
		inputs[size] = in
		if needsOnePartition(o) {
			one := &input{topic: in.topic + "-p1", size: size, records: o.records}
			if err := preloadOne(ctx, 1, b, one, created); err != nil {
				return nil, err
			}
			in.single = one
		}
	}
	return inputs, nil
}

// preloadOne creates in's topic with partitions partitions, adds it to
// created, and fills it.
func preloadOne(ctx context.Context, partitions int, b *broker, in *input, created *[]string) error {
	*created = append(*created, in.topic)
	if err := b.createTopics(ctx, partitions, in.topic); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.preload(ctx, in); err != nil {
		return err
	}
	say("pre-loaded %s: %d records, %.1f MB, in %.1fs", in.topic, in.records, float64(in.bytes)/1e6, time.Since(t0).Seconds())
	return nil
}

// needsOnePartition reports whether a system of the run drains the input
// in one partition.
func needsOnePartition(o options) bool {
	for _, k := range o.systems {
		if s, _ := systemByKey(k); s.onePartition {
			return true
		}
	}
	return false
}

// needsStateful reports whether a stateful system runs.
func needsStateful(o options) bool { return len(statefulKeys(o)) > 0 }

// statefulKeys are the run's systems with state stores, in order.
func statefulKeys(o options) []string {
	var ks []string
	for _, k := range o.systems {
		if s, _ := systemByKey(k); len(s.stores) > 0 {
			ks = append(ks, k)
		}
	}
	return ks
}
