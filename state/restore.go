package state

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Restore brings partitions of every store up to their changelog's end
// and makes them ready for transactions; call it on assignment, before any
// record of those partitions is processed, and not while a Txn uses them.
// It blocks until every partition is restored or ctx ends.
//
// A partition reads from its checkpoint: after a clean run nothing, after
// a SIGKILL the transactions committed since its last Commit. It is
// rebuilt from the start (its local keys wiped first) when it has no
// checkpoint, or one the changelog cannot have written: ahead of its end,
// before its start, or of another topic ID (the topic was recreated).
// The end is the log-end offset taken when Restore starts, and a
// partition is restored when the restore's fetch position reached it,
// whatever the last record was (see fetcher): an empty changelog, a tail
// that is only a transaction marker or that compaction removed never
// leave it waiting. It reads with read_committed isolation: a
// transaction of the partition's previous owner still open then holds
// Restore back until it commits or aborts, so that no committed write is
// missed. The same holds for this processor's
// own transaction: call Restore outside the group's rebalance callbacks
// and with no Kafka transaction of its own open (between End and the next
// Begin), or it waits for that transaction's timeout.
func (m *Manager) Restore(ctx context.Context, partitions []int32) error {
	return m.RestoreStores(ctx, m.opts.Stores, partitions)
}

// RestoreStores is Restore for some of the stores only: with a
// repartition hop, the stores before it are partitioned like the input
// and those after it like the repartition topic, and each is restored for
// its own topic's assigned partitions.
func (m *Manager) RestoreStores(ctx context.Context, stores []string, partitions []int32) error {
	if len(partitions) == 0 || len(stores) == 0 {
		return nil
	}
	topics := make([]string, 0, len(stores))
	for _, s := range stores {
		t, ok := m.topics[s]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownStore, s)
		}
		topics = append(topics, t)
	}
	cl, err := kgo.NewClient(m.opts.ClientOpts...)
	if err != nil {
		return fmt.Errorf("state: creating the restore client: %w", err)
	}
	defer cl.Close()
	plan, err := m.plan(ctx, kadm.NewClient(cl), topics, partitions)
	if err != nil {
		return err
	}
	begun := time.Now()
	if err := m.read(ctx, cl, plan); err != nil {
		return err
	}
	m.finish(plan, time.Since(begun).Seconds())
	return nil
}

// finish makes the partitions of plan, read to their ends in secs
// seconds, ready.
func (m *Manager) finish(plan map[part]*restoring, secs float64) {
	m.mu.Lock()
	for _, r := range plan {
		pi := m.info(r.p)
		pi.st, pi.ready, pi.restoring = r.st, true, false
		pi.restored, pi.seconds, pi.rebuilt = r.read, secs, r.rebuilt
	}
	m.mu.Unlock()
	for _, r := range plan {
		m.log.Info("state restored", "topic", r.p.topic, "partition", r.p.partition,
			"records", r.read, "from", r.from, "to", r.end, "rebuilt", r.rebuilt, "seconds", secs)
	}
	m.met.seconds.Observe(secs)
}

// restoring is the restore of one partition.
type restoring struct {
	p        part
	id       [16]byte
	leader   int32 // the broker leading the partition, as last looked up
	from     int64 // first offset to read
	end      int64 // log-end offset when Restore began
	pos      int64 // the offset up to which pending and the store hold the changelog
	st       partState
	rebuilt  bool
	read     int64   // data records read
	pending  []write // records read and not yet written, in offset order
	inflight int     // data records in pending
	// seen is, for a partition rebuilt from empty, the keys the rebuild
	// wrote (see keyFilter); nil when the partition kept its entries.
	seen *keyFilter
}

// plan reads the changelogs' metadata and the checkpoints, wipes the
// partitions to rebuild and says where each one starts.
func (m *Manager) plan(ctx context.Context, adm *kadm.Client, topics []string, partitions []int32) (map[part]*restoring, error) {
	details, err := m.listed(ctx, adm, topics)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("state: listing the changelogs' start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("state: listing the changelogs' end offsets: %w", err)
	}
	plan := map[part]*restoring{}
	for _, topic := range topics {
		d, ok := details[topic]
		if !ok || d.Err != nil {
			return nil, fmt.Errorf("state: changelog %s: not found (EnsureChangelogs creates it): %v", topic, d.Err)
		}
		m.mu.Lock()
		m.topicIDs[topic] = d.ID
		m.mu.Unlock()
		for _, p := range partitions {
			s, okS := starts.Lookup(topic, p)
			e, okE := ends.Lookup(topic, p)
			if !okS || !okE {
				return nil, fmt.Errorf("state: changelog %s has no partition %d", topic, p)
			}
			r, err := m.start(part{topic, p}, d.ID, s.Offset, e.Offset)
			if err != nil {
				return nil, err
			}
			r.leader = d.Partitions[p].Leader
			plan[r.p] = r
		}
	}
	filterRebuilds(plan)
	return plan, nil
}

// start decides where p's restore starts, wiping it to rebuild.
func (m *Manager) start(p part, id [16]byte, start, end int64) (*restoring, error) {
	st, err := m.db.readPart(p)
	if err != nil {
		return nil, err
	}
	r := &restoring{p: p, id: id, end: end, st: st}
	if why := m.rebuildReason(st, id, start, end); why == "" {
		r.from = st.cp.next
	} else {
		if err := m.db.wipe(p); err != nil {
			return nil, err
		}
		r.from, r.st, r.rebuilt = start, partState{}, true
		if why != "new" {
			m.met.rebuilds.WithLabelValues(m.storeOf(p.topic), why).Inc()
		}
		m.log.Info("state rebuilding from the changelog's start", "topic", p.topic, "partition", p.partition,
			"reason", why, "checkpoint", st.cp.next, "had_checkpoint", st.hasCP, "start", start, "end", end)
	}
	r.pos = r.from
	m.mu.Lock()
	pi := m.info(p)
	pi.ready, pi.restoring, pi.restored, pi.rebuilt, pi.st = false, true, 0, r.rebuilt, r.st
	pi.from, pi.end = r.from, r.end
	m.mu.Unlock()
	return r, nil
}

// rebuildReason says why a partition of persisted state st must be
// rebuilt from its changelog's start, "" when it need not: its checkpoint
// is one the changelog (of topic ID id, offsets start to end) can have
// written. "new" is a partition without a checkpoint whose changelog is
// empty, which is not counted as a rebuild.
func (m *Manager) rebuildReason(st partState, id [16]byte, start, end int64) string {
	return rebuildWhy(st, id, start, end, m.wiped)
}

// storeOf returns the store name of a changelog topic.
func (m *Manager) storeOf(topic string) string {
	for s, t := range m.topics {
		if t == topic {
			return s
		}
	}
	return topic
}

// read reads the changelog partitions of plan from their positions to
// their ends (see drain), writing a batch with its checkpoint every
// RestoreBatch records and at each partition's end, on the appliers'
// lanes while it reads on. A partition is read when the fetch position
// reached its end, whatever the last record was.
func (m *Manager) read(ctx context.Context, cl *kgo.Client, plan map[part]*restoring) error {
	a := newAppliers(plan)
	take := func(x fetched) error { return m.take(a, x.r, x.recs, x.next) }
	reset := func(r *restoring, next int64) error { return m.reset(a, r, next) }
	err := drain(ctx, cl, maps.Values(plan), "state: restore interrupted", reset, take)
	if werr := a.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	left := 0
	for _, r := range plan {
		if r.pos < r.end {
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("state: restore interrupted with %d partitions left: %w", left, context.Cause(ctx))
	}
	return nil
}

// take adds recs, a response's records of r, to r's pending writes, and
// writes them every RestoreBatch records and when the fetch position next
// reached r's end.
func (m *Manager) take(a *appliers, r *restoring, recs []*kgo.Record, next int64) error {
	for _, rec := range recs {
		if rec.Attrs.IsControl() {
			continue
		}
		if rec.Value != nil && len(rec.Value) < 8 {
			return fmt.Errorf("state: changelog %s/%d offset %d: a value of %d bytes is not a state record", rec.Topic, rec.Partition, rec.Offset, len(rec.Value))
		}
		if r.pending == nil { // at its size: grown by appends, it allocated five times that
			r.pending = a.batch(int(min(int64(m.opts.RestoreBatch), r.end-r.pos)))
		}
		r.pending = append(r.pending, write{key: rec.Key, enc: rec.Value})
		r.read++
		r.inflight++
		if r.inflight >= m.opts.RestoreBatch {
			r.pos = rec.Offset + 1
			if err := m.flush(a, r); err != nil {
				return err
			}
		}
	}
	r.pos = next
	if r.inflight < m.opts.RestoreBatch && r.pos < r.end {
		return nil
	}
	return m.flush(a, r)
}

// reset voids what r read so far and rebuilds it from next, its
// changelog's new log start: records it had not read yet were deleted.
// The wipe runs on r's lane, after the batches read before it.
func (m *Manager) reset(a *appliers, r *restoring, next int64) error {
	err := a.hand(r, func() error {
		if err := m.db.wipe(r.p); err != nil {
			return err
		}
		r.st = partState{}
		if r.seen != nil {
			r.seen.clear() // wiped again: the rebuild's keys are gone
		}
		return nil
	})
	if err != nil {
		return err
	}
	m.log.Warn("state rebuilding from the changelog's start: its start moved past the restore", "topic", r.p.topic,
		"partition", r.p.partition, "position", r.pos, "start", next)
	m.met.rebuilds.WithLabelValues(m.storeOf(r.p.topic), "start_moved").Inc()
	r.pending, r.inflight, r.read = r.pending[:0], 0, 0
	r.rebuilt, r.from, r.pos = true, next, next
	if r.pos >= r.end {
		return m.flush(a, r) // nothing left to read: the checkpoint alone
	}
	return nil
}

// flush hands r's pending writes to r's lane, which writes them and r's
// checkpoint in one batch, synced to disk when it is the partition's
// last; r goes on reading into a batch of its own.
func (m *Manager) flush(a *appliers, r *restoring) error {
	writes, cp, read, n := r.pending, checkpoint{next: r.pos, topicID: r.id}, r.read, r.inflight
	last := r.pos >= r.end
	r.pending, r.inflight = nil, 0
	return a.hand(r, func() error {
		pw := partWrites{p: r.p, cp: cp, before: r.st, writes: writes, seen: r.seen}
		sts, err := m.db.apply([]partWrites{pw}, last)
		if err != nil {
			return err
		}
		r.st = sts[0]
		m.met.restored.Add(float64(n))
		m.mu.Lock()
		pi := m.info(r.p)
		pi.restored, pi.st = read, r.st
		m.mu.Unlock()
		if writes != nil {
			a.recycle(writes)
		}
		return nil
	})
}
