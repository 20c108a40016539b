package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// Repartition is the hop of a chain whose stateful stage keeps its state
// by something other than the input's partitioning key
// (transform.Chain.Hop): records from the input run the chain up to that
// stage and are produced, keyed by the stage's group key, to Topic inside
// the transaction that commits their input offsets; records of Topic,
// which the session consumes as one more input of the same group, run
// the rest of the chain, their offsets committed in the transaction that
// writes their outputs and state. Both hops are transactional, so each
// input record counts once, in its group key's one partition.
type Repartition struct {
	// Topic is the repartition topic, <group>-<store>-repartition; it
	// must be one of Options.InputTopics.
	Topic string
	// Partitions is Topic's partition count: a record goes to the
	// partition Kafka's default partitioner gives its group key
	// (murmur2), which the producer must keep (kgo.ManualPartitioner for
	// Topic).
	Partitions int32
	// Purge deletes the records of Topic's partitions before the given
	// offsets (DeleteRecords): they were consumed and committed. Nil
	// purges nothing.
	Purge func(ctx context.Context, before map[int32]int64) error
	// PurgeInterval is how often, at most, Purge runs after a commit;
	// default 30s.
	PurgeInterval time.Duration
}

// Headers of the records in a repartition topic, after the record's own
// headers and its lineage (processor.source, the input it came from):
// the record's key and the topic a stage before the hop routed it to, if
// any, which the second segment restores.
const (
	// HeaderRepartitionKey is 'k' then the record's key; absent for a
	// null key.
	HeaderRepartitionKey = "processor.repartition.key"
	// HeaderRepartitionTopic is the topic a stage before the hop routed
	// the record to; absent when none.
	HeaderRepartitionTopic = "processor.repartition.topic"
)

// defaultPurgeInterval is how often consumed repartition records are
// purged by default, as Kafka Streams' repartition.purge.interval.ms.
const defaultPurgeInterval = 30 * time.Second

// hop is the loop's side of a Repartition.
type hop struct {
	Repartition
	at        int             // the hop stage's index in the chain
	lastPurge time.Time       // when Purge last started
	purging   atomic.Bool     // a Purge is running
	purged    map[int32]int64 // the offsets purged up to
}

// initHop splits every worker's chain around the hop stage and readies
// the purge. The chain must need a hop (transform.Chain.Hop).
func (p *Pipeline) initHop(chain *transform.Chain, r Repartition) error {
	at, e, ok := chain.Hop()
	if !ok {
		return errors.New("pipeline: Options.Repartition for a chain that needs no hop")
	}
	if r.Partitions <= 0 || !slices.Contains(p.o.InputTopics, r.Topic) {
		return errors.New("pipeline: Options.Repartition needs its partition count and its topic among Options.InputTopics")
	}
	if r.PurgeInterval <= 0 {
		r.PurgeInterval = defaultPurgeInterval
	}
	p.hop = &hop{Repartition: r, at: at, purged: map[int32]int64{}}
	for i := range p.pool.workers {
		w := &p.pool.workers[i]
		out := &hopOut{gk: w.chain.GroupKeyerAt(at), topic: r.Topic, parts: r.Partitions}
		w.chain, w.after = w.chain.Split(at,
			[]transform.Stage{{Name: e.String(), T: out}},
			[]transform.Stage{{Name: "repartition", T: hopIn{}}})
	}
	return nil
}

// fromHop reports whether src is a record of the repartition topic.
func (p *Pipeline) fromHop(topic string) bool { return p.hop != nil && topic == p.hop.Topic }

// hopOut ends the first segment: it keys each record by the hop stage's
// group key, sends it to the repartition topic's partition of that key,
// and keeps what the second segment restores in headers after the
// record's own: the input it came from (lineage), its key, and the topic
// a stage routed it to.
type hopOut struct {
	gk    transform.GroupKeyer
	topic string
	parts int32
}

// Process implements transform.Transform.
func (h *hopOut) Process(ctx context.Context, src record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	gk, err := h.gk.GroupKey(ctx, r)
	if err != nil {
		return out, err
	}
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+3)
	for _, x := range r.Headers {
		if !record.IsLineageHeader(x.Key) && x.Key != HeaderRepartitionKey && x.Key != HeaderRepartitionTopic {
			hs = append(hs, x)
		}
	}
	hs = append(hs, kgo.RecordHeader{Key: record.HeaderSource, Value: record.AppendLineage(nil, src)})
	if r.Key != nil {
		hs = append(hs, kgo.RecordHeader{Key: HeaderRepartitionKey, Value: append([]byte{'k'}, r.Key...)})
	}
	if r.Topic != "" {
		hs = append(hs, kgo.RecordHeader{Key: HeaderRepartitionTopic, Value: []byte(r.Topic)})
	}
	r.Headers = hs
	r.Key = gk
	r.Topic = h.topic
	r.Partition = KeyPartition(gk, h.parts)
	return append(out, r), nil
}

// Touches implements transform.Toucher: it changes the key.
func (h *hopOut) Touches() transform.Parts { return transform.PartKey }

// hopIn begins the second segment: it gives the record back the key and
// topic it had before the hop and drops the hop's headers.
type hopIn struct{}

// Process implements transform.Transform.
func (hopIn) Process(_ context.Context, _ record.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	key, topic, n := restoreHop(r.Headers)
	r.Headers, r.Key, r.Topic = r.Headers[:n:n], key, topic
	return append(out, r), nil
}

// restoreHop reads the trailing headers hopOut wrote: the record's key
// before the hop, its routed topic, and how many headers precede them.
func restoreHop(hs []kgo.RecordHeader) (key []byte, topic string, n int) {
	n = len(hs)
	for n > 0 {
		h := hs[n-1]
		switch h.Key {
		case record.HeaderSource:
		case HeaderRepartitionKey:
			if len(h.Value) > 0 {
				key = h.Value[1:]
			}
		case HeaderRepartitionTopic:
			topic = string(h.Value)
		default:
			return key, topic, n
		}
		n--
	}
	return key, topic, n
}

// origin returns the input a repartition record was made from, by its
// lineage header, or src when it has none.
func (p *Pipeline) origin(src record.Source, r *kgo.Record) record.Source {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == record.HeaderSource {
			if o, ok := record.Lineage(r.Headers[i : i+1]); ok {
				return o
			}
			break
		}
	}
	return src
}

// unhop makes a repartition record that failed look as it was before the
// hop, for its dead letter: its key and headers back (the value stays as
// the first segment made it), and returns the input it came from.
func (p *Pipeline) unhop(src record.Source, r *kgo.Record) record.Source {
	o := p.origin(src, r)
	key, _, n := restoreHop(r.Headers)
	r.Headers, r.Key = r.Headers[:n:n], key
	return o
}

// purgeHop deletes the consumed records of the repartition topic's
// partitions this instance committed, at most every PurgeInterval, in
// the background: after a commit, the group's committed offsets are
// where every owner resumes, so nothing before them is read again.
func (p *Pipeline) purgeHop() {
	h := p.hop
	if h == nil || h.Purge == nil || time.Since(h.lastPurge) < h.PurgeInterval || h.purging.Load() {
		return
	}
	before := map[int32]int64{}
	for part, off := range p.observer().CommittedOffsets()[h.Topic] {
		if off > h.purged[part] {
			before[part] = off
		}
	}
	if len(before) == 0 {
		return
	}
	h.lastPurge = time.Now()
	h.purging.Store(true)
	go func() {
		defer h.purging.Store(false)
		ctx, cancel := context.WithTimeout(p.work, 10*time.Second)
		defer cancel()
		if err := h.Purge(ctx, before); err != nil {
			p.log.Warn("purging the consumed records of the repartition topic failed; retrying after the next commit",
				"topic", h.Topic, "err", err.Error())
			return
		}
		p.log.Debug("purged the consumed records of the repartition topic", "topic", h.Topic, "before", fmt.Sprint(before))
	}()
	for part, off := range before { // a failure is retried from where the group is then
		h.purged[part] = off
	}
}

// KeyPartition is the partition of a topic of n partitions that Kafka's
// default partitioner (and franz-go's) gives a record keyed key:
// murmur2 of the key, made positive, modulo n.
func KeyPartition(key []byte, n int32) int32 {
	return int32((murmur2(key) & 0x7fffffff) % uint32(n))
}

// murmur2 is Kafka's hash of record keys (Utils.murmur2).
func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		b = b[4:]
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// runningIn is the entry w runs, or last ran, for a record of topic: in
// the second segment for a record of the repartition topic.
func (p *Pipeline) runningIn(w *worker, topic string) transform.Entry {
	if w.after != nil && p.fromHop(topic) {
		return w.after.Running()
	}
	return w.chain.Running()
}
