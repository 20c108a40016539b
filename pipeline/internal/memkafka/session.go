package memkafka

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// Output is a record a committed transaction wrote, with the input it
// came of and, for a dead letter, why.
type Output struct {
	Record     *kgo.Record
	Source     transform.Source
	DeadLetter *txn.DeadLetter
}

// pending is an output of the open transaction: where it is stored, and
// what Output says of it.
type pending struct {
	at  at
	out Output
}

// tp names a topic's partition.
type tp struct {
	topic string
	part  int32
}

// Session is a consumer of group on the input topics of a Cluster, with
// every partition of them assigned. Every method but the Observer's and
// those named safe runs on the loop's goroutine, as the loop promises.
type Session struct {
	c            *Cluster
	group, txnID string
	in           []string
	m            *txn.Metrics
	ready        atomic.Bool
	epoch        atomic.Uint64 // what AssignmentEpoch adds to 1: a test's rebalances
	// revokeAfter, when set, is a partition the next poll that returns
	// records revokes after it polled them (a rebalance that lands
	// between a poll and the loop's look at it); revoked are the
	// partitions so revoked, which later polls and Assigned leave out.
	revokeAfter atomic.Pointer[tp]
	revoked     map[tp]bool // under c.mu
	// keep: the outputs of committed transactions are kept for
	// TakeCommitted (under c.mu); waiting: a poll waits for records.
	keep     bool
	kept     []Output
	waiting  bool
	inTxn    bool
	begun    time.Time
	pos      map[tp]int64
	pending  []pending     // the open transaction's outputs
	sent     []*kgo.Record // and the records the loop produced
	failures []txn.Failure
	failed   bool
}

// NewSession returns the session of group, with transactional id txnID,
// on the input topics in; m are its transaction metrics.
func NewSession(c *Cluster, group, txnID string, in []string, m *txn.Metrics) *Session {
	return &Session{c: c, group: group, txnID: txnID, in: in, m: m}
}

// KeepCommitted makes the session keep the outputs of its committed
// transactions for TakeCommitted; call it before the loop runs.
func (s *Session) KeepCommitted() { s.keep = true }

// TakeCommitted returns the outputs of the transactions committed since
// the last call, in the order they were produced; safe from any
// goroutine.
func (s *Session) TakeCommitted() []Output {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	k := s.kept
	s.kept = nil
	return k
}

// Waiting reports whether a poll waits for records, none being there: the
// loop is idle, everything polled before ended. Safe from any goroutine.
func (s *Session) Waiting() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.waiting
}

// Rebalance changes the assignment epoch, as a rebalance that kept the
// same partitions does; safe from any goroutine.
func (s *Session) Rebalance() { s.epoch.Add(1) }

// RevokeAfterPoll makes the next poll that returns records revoke
// partition of the first input topic after it polled them; safe from any
// goroutine.
func (s *Session) RevokeAfterPoll(partition int32) {
	s.revokeAfter.Store(&tp{s.in[0], partition})
}

// RevokePending reports whether a RevokeAfterPoll has not happened yet.
func (s *Session) RevokePending() bool { return s.revokeAfter.Load() != nil }

// Init reads the group's committed offsets as the positions.
func (s *Session) Init(context.Context) error {
	s.pos = map[tp]int64{}
	for _, topic := range s.in {
		for p, off := range s.c.Committed(s.group, topic) {
			s.pos[tp{topic, p}] = off
		}
	}
	s.ready.Store(true)
	return nil
}

// pollLocked takes up to max records from the positions on, topic after
// topic and partition after partition.
func (s *Session) pollLocked(max int) (kgo.Fetches, int) {
	var f kgo.Fetch
	n := 0
	for _, topic := range s.in {
		ft := kgo.FetchTopic{Topic: topic}
		for p, part := range s.c.topics[topic].parts {
			at := tp{topic, int32(p)}
			if s.revoked[at] {
				continue
			}
			end := endOf(part)
			fp := kgo.FetchPartition{Partition: int32(p), HighWatermark: end, LastStableOffset: end}
			for _, m := range part {
				if n >= max {
					break
				}
				if m.r.Offset >= s.pos[at] {
					fp.Records = append(fp.Records, Clone(m.r))
					n++
				}
			}
			if len(fp.Records) > 0 {
				s.pos[at] = fp.Records[len(fp.Records)-1].Offset + 1
				ft.Partitions = append(ft.Partitions, fp)
			}
		}
		if len(ft.Partitions) > 0 {
			f.Topics = append(f.Topics, ft)
		}
	}
	if p := s.revokeAfter.Load(); n > 0 && p != nil && s.revokeAfter.CompareAndSwap(p, nil) {
		if s.revoked == nil {
			s.revoked = map[tp]bool{}
		}
		s.revoked[*p] = true
		s.epoch.Add(1)
	}
	return kgo.Fetches{f}, n
}

// Poll returns up to max records from the positions on, waiting for
// inputs until ctx ends.
func (s *Session) Poll(ctx context.Context, max int) kgo.Fetches {
	for {
		s.c.mu.Lock()
		fs, n := s.pollLocked(max)
		if n > 0 {
			s.waiting = false
			s.c.mu.Unlock()
			return fs
		}
		if !s.waiting {
			s.waiting = true
			s.c.changedLocked()
		}
		wake := s.c.changed
		s.c.mu.Unlock()
		select {
		case <-ctx.Done():
			s.c.mu.Lock()
			s.waiting = false
			s.c.mu.Unlock()
			return nil
		case <-wake:
		}
	}
}

// Begin opens a transaction.
func (s *Session) Begin(context.Context) error {
	s.inTxn, s.begun = true, time.Now()
	return nil
}

// InTxn reports whether a transaction is open.
func (s *Session) InTxn() bool { return s.inTxn }

// Begun is when the open transaction began.
func (s *Session) Begun() time.Time { return s.begun }

// Produce stores r in the open transaction, or fails it as a producer
// would: its topic does not exist, it is larger than the topic's limit, or
// ctx has ended.
func (s *Session) Produce(ctx context.Context, r *kgo.Record, src transform.Source) {
	s.produce(ctx, r, Output{Source: src})
}

// ProduceDeadLetter stores the dead letter r of input src as Produce
// does.
func (s *Session) ProduceDeadLetter(ctx context.Context, r *kgo.Record, src transform.Source, why txn.DeadLetter) {
	s.produce(ctx, r, Output{Source: src, DeadLetter: &why})
}

func (s *Session) produce(ctx context.Context, r *kgo.Record, out Output) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	t := s.c.topics[r.Topic]
	if t == nil && s.c.autoCreate && ctx.Err() == nil {
		t = &topic{parts: make([][]stored, 1)}
		s.c.topics[r.Topic] = t
	}
	if t != nil {
		r.Partition = partitionFor(r.Key, len(t.parts)) // a failed record has its partition too
	}
	var err error
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case t == nil:
		err = kerr.UnknownTopicOrPartition
	case t.limit > 0 && s.c.size != nil && !s.c.oneBatch && s.c.size(r) > t.limit:
		err = kerr.MessageTooLarge
	}
	if err != nil {
		s.failed = true
		s.failures = append(s.failures, txn.Failure{Record: r, Err: err})
		return
	}
	where := s.c.appendLocked(r, open)
	if s.keep {
		out.Record = Clone(r)
	}
	s.pending = append(s.pending, pending{at: where, out: out})
	s.sent = append(s.sent, r)
}

// TakeFailures returns the outputs that failed since the last call.
func (s *Session) TakeFailures() []txn.Failure {
	f := s.failures
	s.failures = nil
	return f
}

// failBatches fails, with oneBatch, the outputs of every partition that
// holds one larger than its topic's limit.
func (s *Session) failBatches() {
	if !s.c.oneBatch || s.c.size == nil {
		return
	}
	over := map[tp]bool{}
	for _, r := range s.sent {
		if t := s.c.topics[r.Topic]; t.limit > 0 && s.c.size(r) > t.limit {
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
func (s *Session) End(_ context.Context, records int, abort txn.Reason) (bool, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	defer s.c.changedLocked()
	s.failBatches()
	if abort == "" && s.failed {
		abort = txn.ReasonProduce
	}
	state := committed
	if abort != "" {
		state = aborted
	}
	for _, p := range s.pending {
		s.c.topics[p.at.topic].parts[p.at.part][p.at.i].state = state
		if s.keep && state == committed {
			s.kept = append(s.kept, p.out)
		}
	}
	s.pending, s.sent, s.failed, s.inTxn = s.pending[:0], s.sent[:0], false, false
	g := s.c.groups[s.group]
	if g == nil {
		g = map[string]map[int32]int64{}
		s.c.groups[s.group] = g
	}
	if abort != "" {
		for at := range s.pos {
			s.pos[at] = g[at.topic][at.part]
		}
		s.m.Aborted.WithLabelValues(string(abort)).Inc()
		return false, nil
	}
	for at, off := range s.pos {
		if g[at.topic] == nil {
			g[at.topic] = map[int32]int64{}
		}
		g[at.topic][at.part] = off
	}
	s.m.Committed.Inc()
	s.m.Records.Observe(float64(records))
	return true, nil
}

// MaxRecordBytes is 0, not known: no test record reaches a broker's own
// limit, and a record over its topic's limit fails to produce.
func (s *Session) MaxRecordBytes(string) int { return 0 }

// MissingTopics returns which of topics the cluster lacks (none when it
// creates topics on demand); safe from any goroutine.
func (s *Session) MissingTopics(_ context.Context, topics []string) ([]string, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	var missing []string
	for _, t := range topics {
		if s.c.topics[t] == nil && !s.c.autoCreate {
			missing = append(missing, t)
		}
	}
	return missing, nil
}

// AssignmentEpoch is 1 until a test rebalances or revokes.
func (s *Session) AssignmentEpoch() uint64 { return 1 + s.epoch.Load() }

// Close leaves the group.
func (s *Session) Close() { s.ready.Store(false) }
