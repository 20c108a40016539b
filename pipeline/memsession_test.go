package pipeline

// A session in memory, for the loop tests of policies, the poison book and
// the budget, which need no broker: memCluster holds topics of partitions
// of records, each output with the state of its transaction, and the
// groups' committed offsets; memSession is a Session and an Observer on
// it, with the session's semantics as the loop sees them (an abort rewinds
// to the committed offsets, a failed output aborts the commit and is named
// by TakeFailures, a topic the cluster lacks fails its outputs). A
// loopEnv made by newMemEnv runs on it: the same checks, in milliseconds.

import (
	"context"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

var (
	_ Session  = (*memSession)(nil)
	_ Observer = (*memSession)(nil)
)

// The states of a record in a memTopic.
const (
	memOpen = iota
	memCommitted
	memAborted
)

// memRecord is one record of a partition, and its transaction's state.
type memRecord struct {
	r     *kgo.Record
	state int
}

// memAt is where a record is stored.
type memAt struct {
	topic string
	part  int32
	i     int
}

// memTopic is a topic: its partitions and its max.message.bytes (0: no
// limit).
type memTopic struct {
	parts [][]memRecord
	limit int
}

// memCluster is a cluster in memory.
type memCluster struct {
	mu     sync.Mutex
	topics map[string]*memTopic
	groups map[string]map[string]map[int32]int64 // group -> topic -> partition -> next offset
	wake   chan struct{}                         // closed and replaced when an input arrives
	// oneBatch: the outputs of a transaction to one partition travel in
	// one batch, which is refused as a whole when one of them is larger
	// than the topic's limit (a lingering producer on a real broker).
	oneBatch bool
}

func newMemCluster() *memCluster {
	return &memCluster{topics: map[string]*memTopic{}, groups: map[string]map[string]map[int32]int64{}, wake: make(chan struct{})}
}

// create makes topic with partitions partitions and limit (0: none).
func (c *memCluster) create(topic string, partitions int, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topics[topic] = &memTopic{parts: make([][]memRecord, partitions), limit: limit}
}

// partitionFor is where a record with key goes in a topic of n
// partitions: by the key's hash, or the first partition without a key.
func partitionFor(key []byte, n int) int32 {
	if key == nil || n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// appendLocked stores a copy of r in its topic, partitioned by key, and
// sets r's partition and offset, as a producer does.
func (c *memCluster) appendLocked(r *kgo.Record, state int) memAt {
	t := c.topics[r.Topic]
	r.Partition = partitionFor(r.Key, len(t.parts))
	r.Offset = int64(len(t.parts[r.Partition]))
	t.parts[r.Partition] = append(t.parts[r.Partition], memRecord{r: cloneRecord(r), state: state})
	return memAt{r.Topic, r.Partition, int(r.Offset)}
}

// produceInputs stores recs, committed, in their topics and wakes polls.
func (c *memCluster) produceInputs(recs []*kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		r.Timestamp = time.Now()
		c.appendLocked(r, memCommitted)
	}
	close(c.wake)
	c.wake = make(chan struct{})
}

// read returns topic's records: committed ones only, or every one
// (read_uncommitted: open and aborted ones too).
func (c *memCluster) read(topic string, committed bool) []*kgo.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*kgo.Record
	for _, part := range c.topics[topic].parts {
		for _, m := range part {
			if !committed || m.state == memCommitted {
				out = append(out, cloneRecord(m.r))
			}
		}
	}
	return out
}

// committed returns group's committed offsets of topic.
func (c *memCluster) committed(group, topic string) map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneOffsets(c.groups[group][topic])
}

// cloneOffsets copies m, never nil.
func cloneOffsets(m map[int32]int64) map[int32]int64 {
	out := make(map[int32]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cloneRecord copies what a broker would keep of r.
func cloneRecord(r *kgo.Record) *kgo.Record {
	c := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: slices.Clone(r.Key), Value: slices.Clone(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
	}
	return c
}

// memSession is a consumer of group on topic in of a memCluster, with the
// whole topic assigned.
type memSession struct {
	c            *memCluster
	group, txnID string
	in           string
	m            *txn.Metrics
	ready        atomic.Bool
	epoch        atomic.Uint64 // what AssignmentEpoch adds to 1: a test's rebalances
	// revokeAfter, when set, is a partition the next poll that returns
	// records revokes after it polled them (a rebalance that lands
	// between a poll and the loop's look at it); revoked are the
	// partitions so revoked, which later polls and Assigned leave out.
	revokeAfter atomic.Pointer[int32]
	revoked     map[int32]bool // under c.mu

	// The loop's goroutine only.
	inTxn    bool
	begun    time.Time
	pos      map[int32]int64
	pending  []memAt       // the open transaction's outputs
	sent     []*kgo.Record // and the records the loop produced
	failures []txn.Failure
	failed   bool
}

func newMemSession(c *memCluster, group, txnID, in string, m *txn.Metrics) *memSession {
	return &memSession{c: c, group: group, txnID: txnID, in: in, m: m}
}

func (s *memSession) Init(context.Context) error {
	s.pos = s.c.committed(s.group, s.in)
	s.ready.Store(true)
	return nil
}

// Poll returns up to max records from the positions on, partition after
// partition, waiting for inputs until ctx ends.
func (s *memSession) Poll(ctx context.Context, max int) kgo.Fetches {
	for {
		s.c.mu.Lock()
		ft := kgo.FetchTopic{Topic: s.in}
		n := 0
		for p, part := range s.c.topics[s.in].parts {
			if s.revoked[int32(p)] {
				continue
			}
			end := int64(len(part))
			fp := kgo.FetchPartition{Partition: int32(p), HighWatermark: end, LastStableOffset: end}
			for off := s.pos[int32(p)]; off < end && n < max; off++ {
				fp.Records = append(fp.Records, cloneRecord(part[off].r))
				n++
			}
			if len(fp.Records) > 0 {
				s.pos[int32(p)] += int64(len(fp.Records))
				ft.Partitions = append(ft.Partitions, fp)
			}
		}
		wake := s.c.wake
		if p := s.revokeAfter.Load(); n > 0 && p != nil && s.revokeAfter.CompareAndSwap(p, nil) {
			if s.revoked == nil {
				s.revoked = map[int32]bool{}
			}
			s.revoked[*p] = true
			s.epoch.Add(1)
		}
		s.c.mu.Unlock()
		if n > 0 {
			return kgo.Fetches{{Topics: []kgo.FetchTopic{ft}}}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

func (s *memSession) Begin(context.Context) error {
	s.inTxn, s.begun = true, time.Now()
	return nil
}

func (s *memSession) InTxn() bool      { return s.inTxn }
func (s *memSession) Begun() time.Time { return s.begun }

// Produce stores r in the open transaction, or fails it as a producer
// would: its topic does not exist, it is larger than the topic's limit, or
// ctx has ended.
func (s *memSession) Produce(ctx context.Context, r *kgo.Record, _ record.Source) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	t := s.c.topics[r.Topic]
	if t != nil {
		r.Partition = partitionFor(r.Key, len(t.parts)) // a failed record has its partition too
	}
	var err error
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case t == nil:
		err = kerr.UnknownTopicOrPartition
	case t.limit > 0 && !s.c.oneBatch && wireBytes(r) > t.limit:
		err = kerr.MessageTooLarge
	}
	if err != nil {
		s.failed = true
		s.failures = append(s.failures, txn.Failure{Record: r, Err: err})
		return
	}
	s.pending = append(s.pending, s.c.appendLocked(r, memOpen))
	s.sent = append(s.sent, r)
}

func (s *memSession) ProduceDeadLetter(ctx context.Context, r *kgo.Record, src record.Source, _ txn.DeadLetter) {
	s.Produce(ctx, r, src)
}

func (s *memSession) TakeFailures() []txn.Failure {
	f := s.failures
	s.failures = nil
	return f
}

// failBatches fails, with oneBatch, the outputs of every partition that
// holds one larger than its topic's limit.
func (s *memSession) failBatches() {
	if !s.c.oneBatch {
		return
	}
	type tp struct {
		topic string
		part  int32
	}
	over := map[tp]bool{}
	for _, r := range s.sent {
		if t := s.c.topics[r.Topic]; t.limit > 0 && wireBytes(r) > t.limit {
			over[tp{r.Topic, r.Partition}] = true
		}
	}
	for _, r := range s.sent {
		if over[tp{r.Topic, r.Partition}] {
			s.failed = true
			s.failures = append(s.failures, txn.Failure{Record: r, Err: kerr.MessageTooLarge})
		}
	}
}

// End commits the open transaction, its outputs and the positions as the
// group's offsets, unless abort is set or an output failed; an abort
// rewinds the positions to the committed offsets.
func (s *memSession) End(_ context.Context, records int, abort txn.Reason) (bool, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.failBatches()
	if abort == "" && s.failed {
		abort = txn.ReasonProduce
	}
	state := memCommitted
	if abort != "" {
		state = memAborted
	}
	for _, at := range s.pending {
		s.c.topics[at.topic].parts[at.part][at.i].state = state
	}
	s.pending, s.sent, s.failed, s.inTxn = s.pending[:0], s.sent[:0], false, false
	g := s.c.groups[s.group]
	if g == nil {
		g = map[string]map[int32]int64{}
		s.c.groups[s.group] = g
	}
	if abort != "" {
		s.pos = cloneOffsets(g[s.in])
		s.m.Aborted.WithLabelValues(string(abort)).Inc()
		return false, nil
	}
	g[s.in] = cloneOffsets(s.pos)
	s.m.Committed.Inc()
	s.m.Records.Observe(float64(records))
	return true, nil
}

// MaxRecordBytes is 0, not known: the tests' sessions name no output
// topics, whose limits a real session reads, and no test record reaches a
// broker's own limit. A record over its topic's limit fails to produce.
func (s *memSession) MaxRecordBytes(string) int { return 0 }

func (s *memSession) MissingTopics(_ context.Context, topics []string) ([]string, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	var missing []string
	for _, t := range topics {
		if s.c.topics[t] == nil {
			missing = append(missing, t)
		}
	}
	return missing, nil
}

func (s *memSession) AssignmentEpoch() uint64 { return 1 + s.epoch.Load() }
func (s *memSession) Close()                  { s.ready.Store(false) }

// The Observer.

func (s *memSession) Ready() bool           { return s.ready.Load() }
func (s *memSession) Connecting() bool      { return false }
func (s *memSession) Metrics() *txn.Metrics { return s.m }

func (s *memSession) Assigned() map[string][]int32 {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	var parts []int32
	for p := range s.c.topics[s.in].parts {
		if !s.revoked[int32(p)] {
			parts = append(parts, int32(p))
		}
	}
	return map[string][]int32{s.in: parts}
}

func (s *memSession) CommittedOffsets() map[string]map[int32]int64 {
	return map[string]map[int32]int64{s.in: s.c.committed(s.group, s.in)}
}

func (s *memSession) EndOffsets(_ context.Context, topics []string) (map[string]map[int32]txn.Ends, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	out := map[string]map[int32]txn.Ends{}
	for _, name := range topics {
		if t := s.c.topics[name]; t != nil {
			out[name] = map[int32]txn.Ends{}
			for p, part := range t.parts {
				end := int64(len(part))
				out[name][int32(p)] = txn.Ends{LogEnd: end, LastStable: end}
			}
		}
	}
	return out, nil
}

func (s *memSession) Identity() (string, string)               { return s.group, s.txnID }
func (s *memSession) Member() (string, int32)                  { return "mem-" + s.txnID, 1 }
func (s *memSession) Guarantee() string                        { return "exactly_once" }
func (s *memSession) Sink() string                             { return "kafka" }
func (s *memSession) CommitFailing() (time.Time, bool, string) { return time.Time{}, false, "" }

// newMemEnv is newLoopEnv on a memCluster: the same topics, no broker.
func newMemEnv(t *testing.T) *loopEnv {
	t.Helper()
	c := newMemCluster()
	e := &loopEnv{t: t, mem: c, in: "in", out: "out", dlq: "dlq", byValue: map[string]*kgo.Record{}}
	for _, topic := range []string{e.in, e.out, e.dlq} {
		c.create(topic, loopPartitions, 0)
	}
	return e
}

// produceMem stores recs (to the input topic when they name none) and
// keeps them, with their offsets, as the input.
func (e *loopEnv) produceMem(recs []*kgo.Record) {
	for _, r := range recs {
		if r.Topic == "" {
			r.Topic = e.in
		}
	}
	e.mem.produceInputs(recs)
	for _, r := range recs {
		e.inputs = append(e.inputs, r)
		e.byValue[string(r.Value)] = r
	}
}
