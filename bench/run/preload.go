package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// preloadInputs creates one input topic per record size and fills it,
// and when an Avro row runs, its Avro twin; each topic created is added
// to created, for the cleanup.
func preloadInputs(ctx context.Context, o options, env *environment, b *broker, prefix string, created *[]string) (map[int]*input, error) {
	inputs := map[int]*input{}
	var table *input // one for every size: the customers do not change
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
		if needsTable(o) {
			if table == nil {
				table = customersTable(prefix)
				// A table topic is compacted; created so before preloadOne
				// finds it there.
				if err := b.createCompacted(ctx, o.partitions, table.topic); err != nil {
					return nil, err
				}
				if err := preloadOne(ctx, o.partitions, b, table, created); err != nil {
					return nil, err
				}
			}
			in.table = table.topic
		}
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

// needsTable reports whether a system of the run reads the customers
// table.
func needsTable(o options) bool {
	for _, k := range o.systems {
		if s, _ := systemByKey(k); s.table {
			return true
		}
	}
	return false
}

// customersTable is the join rows' table: one row per customer key of the
// orders (the warm-up record's, input.record(-1), included, so that every
// order of a run finds its customer), keyed like the orders so that the
// default partitioner puts a customer's row in the partition of its
// orders when the partition counts match.
func customersTable(prefix string) *input {
	orders := &input{size: 100}
	return &input{topic: prefix + "-customers", records: customers + 1, gen: func(n int64) *kgo.Record {
		return customerRow(orders.record(n - 1).Key)
	}}
}

// customerRow is the table's row of the customer key: JSON with the
// customer's id, a name, a tier and a region derived from the key's
// bytes.
func customerRow(key []byte) *kgo.Record {
	h := 0
	for _, c := range key {
		h = h*31 + int(c)
	}
	h &= 0x7fffffff
	tiers, regions := []string{"bronze", "silver", "gold"}, []string{"eu", "us", "apac", "latam"}
	v := fmt.Sprintf(`{"customer":%q,"name":"Customer %s","tier":%q,"region":%q,"since":%d}`,
		key, strings.TrimPrefix(string(key), "customer-"), tiers[h%len(tiers)], regions[h%len(regions)], 2000+h%25)
	return &kgo.Record{Key: slices.Clone(key), Value: []byte(v)}
}

// needsStateful reports whether a stateful system runs.
func needsStateful(o options) bool { return len(statefulKeys(o)) > 0 }

// statefulKeys are the run's systems with state stores or an input of
// their own, in order.
func statefulKeys(o options) []string {
	var ks []string
	for _, k := range o.systems {
		if s, _ := systemByKey(k); len(s.stores) > 0 || s.ownInput {
			ks = append(ks, k)
		}
	}
	return ks
}
