package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// admin returns an admin client of the drill's brokers and its close.
func (d *driver) admin() (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// createTopics creates the input, output and dead-letter topics of the
// run, six partitions each.
func (d *driver) createTopics() error {
	adm, closeFn, err := d.admin()
	if err != nil {
		return err
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics := []string{d.in}
	if d.out != "" {
		topics = append(topics, d.out)
	}
	if d.dlq != "" {
		topics = append(topics, d.dlq)
	}
	resp, err := adm.CreateTopics(ctx, 6, -1, nil, topics...)
	if err != nil {
		return err
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			return fmt.Errorf("%s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// inputBatchMaxBytes is the drill producer's record batch limit: 1 MiB,
// above the largest nearlimit input with its batch (1,048,000 bytes of
// value and about 100 of key and framing) and below the 1048588 bytes that
// kfake and Apache Kafka accept by default (max.message.bytes), which the
// drill's topics keep. franz-go's default, 1,000,012, would refuse them.
const inputBatchMaxBytes = 1 << 20

// produce writes the keyed input at the configured rate; the idempotent
// producer rides out broker restarts without duplicating input. Each
// ordinary value is a JSON object with the record's key and sequence
// number, e.g. {"key":"k7","seq":1007}, which any one-to-one jq program
// accepts; with -poison-every N every Nth input is a marked one instead
// (poisonInput).
func (d *driver) produce() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.DefaultProduceTopic(d.in), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(inputBatchMaxBytes))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed atomic.Pointer[error]
	// Its own random source: d.rng serves the faults, concurrently.
	rng := rand.New(rand.NewPCG(d.o.seed, 2))
	var round []check.Class                // the poison classes still to come in this round
	variants := map[check.Class][]string{} // per class, the variants still to come in its round
	interval := time.Second / time.Duration(d.o.rate)
	next := time.Now()
	for i := range d.o.records {
		next = next.Add(interval)
		if w := time.Until(next); w > time.Millisecond {
			time.Sleep(w)
		}
		key := "k" + strconv.Itoa(i%1000)
		value, err := json.Marshal(inputValue{Key: key, Seq: i})
		if err != nil {
			return err
		}
		var class check.Class
		var variant string
		if d.o.poisonEvery > 0 && i%d.o.poisonEvery == d.o.poisonEvery-1 {
			if len(round) == 0 {
				// Each round holds every class once, in an order of
				// the seed's: even a short drill meets them all.
				round = slices.Clone(d.o.poisonClasses)
				rng.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
			}
			class, round = round[0], round[1:]
			key = check.PoisonKey(class, i)
			if len(variants[class]) == 0 {
				// The variants of a class come in rounds too.
				vs := poisonVariants[class]
				if class == check.JSONBRefused && slices.Contains(d.o.transforms, "jq") {
					vs = vs[:2] // jq turns a lone surrogate into U+FFFD
				}
				vs = slices.Clone(vs)
				rng.Shuffle(len(vs), func(a, b int) { vs[a], vs[b] = vs[b], vs[a] })
				variants[class] = vs
			}
			variant, variants[class] = variants[class][0], variants[class][1:]
			value = poisonInput(rng, variant, key, i)
		}
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(key), Value: value},
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if class != check.Ordinary {
					d.mu.Lock()
					d.poisonWritten[string(class)]++
					d.poisonWritten[string(class)+"/"+variant]++
					d.mu.Unlock()
				}
			})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// waitCaughtUp waits until the group has committed the whole input: in
// Kafka, or with -sink postgres in the database, whose stored offsets are
// the truth there (the group's in Kafka are a copy).
func (d *driver) waitCaughtUp() bool {
	adm, closeFn, err := d.admin()
	if err != nil {
		return false
	}
	defer closeFn()
	for deadline := time.Now().Add(d.o.settle); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, d.in)
		var at func(p int32) (int64, bool)
		var err2 error
		if d.pool != nil {
			var stored map[int32]int64
			stored, err2 = d.storedOffsets(ctx)
			at = func(p int32) (int64, bool) { o, ok := stored[p]; return o, ok }
		} else {
			var committed kadm.OffsetResponses
			committed, err2 = adm.FetchOffsets(ctx, d.group)
			at = func(p int32) (int64, bool) { c, ok := committed.Lookup(d.in, p); return c.At, ok }
		}
		cancel()
		if err1 != nil || err2 != nil {
			continue
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if c, ok := at(o.Partition); !ok || c < o.Offset {
				done = false
			}
		})
		if done {
			return true
		}
	}
	return false
}
