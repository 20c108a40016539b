package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/repartition"
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
	if d.late != "" {
		topics = append(topics, d.late)
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
	if d.joinTable == "" {
		return nil
	}
	// The join's table: compacted; co-partitioned with the input, or
	// with a partition count of its own in the global mode.
	parts := int32(6)
	if d.o.joinMode == "global" {
		parts = 3
	}
	compact := "compact"
	resp, err = adm.CreateTopics(ctx, parts, -1, map[string]*string{"cleanup.policy": &compact}, d.joinTable)
	if err != nil {
		return err
	}
	return resp.Error()
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
// accepts (with -value-format avro that object in the Avro wire format);
// with -poison-every N every Nth input is a marked one instead
// (inputMaker).
func (d *driver) produce() error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.DefaultProduceTopic(d.in), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(inputBatchMaxBytes))
	if err != nil {
		return err
	}
	defer cl.Close()
	// Its own random source: d.rng serves the faults, concurrently.
	m := &inputMaker{d: d, rng: rand.New(rand.NewPCG(d.o.seed, 2)), variants: map[check.Class][]string{}}
	if d.o.valueFormat == "avro" {
		if m.avro, err = d.newAvroInputs(); err != nil {
			return err
		}
	}
	var failed atomic.Pointer[error]
	interval := time.Second / time.Duration(d.o.rate)
	next := time.Now()
	for i := range d.o.records {
		next = next.Add(interval)
		if w := time.Until(next); w > time.Millisecond {
			time.Sleep(w)
		}
		rec, class, variant, err := m.record(i)
		if err != nil {
			return err
		}
		cl.Produce(context.Background(), rec,
			func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				d.written(class, variant)
			})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if d.o.duplicates() {
		d.mu.Lock()
		d.dupSummary = m.dupSummary()
		d.mu.Unlock()
	}
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// written counts a marked input written, by class and variant.
func (d *driver) written(class check.Class, variant string) {
	if class == check.Ordinary {
		return
	}
	d.mu.Lock()
	d.poisonWritten[string(class)]++
	d.poisonWritten[string(class)+"/"+variant]++
	d.mu.Unlock()
}

// inputMaker makes the drill's inputs in order: the ordinary ones, and
// with -poison-every N every Nth a marked one, the classes of
// -poison-classes in rounds of each once in an order drawn by the seed,
// and so each class's variants.
type inputMaker struct {
	d        *driver
	rng      *rand.Rand
	round    []check.Class            // the poison classes still to come in this round
	variants map[check.Class][]string // per class, the variants still to come in its round
	avro     *avroInputs              // with -value-format avro
	dup      dupFields                // the dedupe mode's duplicates (dupes.go)
}

// record returns input i as a record, and its class and variant: a
// duplicate of a recent one (duplicate), or a new one (next).
func (m *inputMaker) record(i int) (*kgo.Record, check.Class, string, error) {
	if key, value, ts, ok := m.duplicate(i); ok {
		return &kgo.Record{Key: []byte(key), Value: value, Timestamp: ts}, check.Ordinary, "", nil
	}
	key, value, class, variant, err := m.next(i)
	if err == nil && class == check.Ordinary {
		m.remember(key, value)
	}
	return &kgo.Record{Key: []byte(key), Value: value}, class, variant, err
}

// next returns input i: its key, its value, and its class and variant
// (Ordinary and "" for an ordinary one).
func (m *inputMaker) next(i int) (key string, value []byte, class check.Class, variant string, err error) {
	key, label := m.inputKey(i)
	if m.avro != nil {
		if err := m.avro.at(i); err != nil {
			return "", nil, "", "", err
		}
	}
	o := m.d.o
	if o.poisonEvery == 0 || i%o.poisonEvery != o.poisonEvery-1 {
		if m.avro != nil {
			value, err = m.avro.ordinary(key, i)
		} else {
			value, err = json.Marshal(inputValue{Key: label, Seq: i})
			value = o.withCustomer(value, i)
		}
		return key, value, check.Ordinary, "", err
	}
	if len(m.round) == 0 {
		// Each round holds every class once, in an order of the
		// seed's: even a short drill meets them all.
		m.round = slices.Clone(o.poisonClasses)
		m.rng.Shuffle(len(m.round), func(a, b int) { m.round[a], m.round[b] = m.round[b], m.round[a] })
	}
	class, m.round = m.round[0], m.round[1:]
	key = check.PoisonKey(class, i)
	if len(m.variants[class]) == 0 {
		// The variants of a class come in rounds too.
		vs := m.d.variantsOf(class)
		if class == check.JSONBRefused && slices.Contains(o.transforms, "jq") {
			vs = vs[:2] // jq turns a lone surrogate into U+FFFD
		}
		vs = slices.Clone(vs)
		m.rng.Shuffle(len(vs), func(a, b int) { vs[a], vs[b] = vs[b], vs[a] })
		m.variants[class] = vs
	}
	variant, m.variants[class] = m.variants[class][0], m.variants[class][1:]
	if m.avro != nil {
		value, err = m.avro.poison(m.rng, variant, key, i)
	} else {
		value = o.withCustomer(poisonInput(m.rng, variant, key, i), i)
	}
	return key, value, class, variant, err
}

// waitCaughtUp waits until the group has committed the whole input: in
// Kafka, or with -sink postgres in the database, whose stored offsets are
// the truth there (the group's in Kafka are a copy); in the stateful mode
// also every record of the group's repartition topics
// (repartition.CaughtUp).
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
			if err2 == nil && d.o.stateful() {
				// The input committed is the first hop; the records it
				// wrote to a repartition topic must be counted too.
				var hopped bool
				hopped, err2 = repartition.CaughtUp(ctx, adm, d.group, committed)
				if err2 == nil && !hopped {
					cancel()
					continue
				}
			}
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
