package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// State is the keyed stores of a chain's stateful transforms
// (transform.Stateful), partitioned like the input: *state.Manager through
// a small adapter. The loop calls it from its own goroutine: Begin after
// each Kafka transaction began, Restore and Revoke between transactions.
type State interface {
	// Begin starts the state side of the Kafka transaction just begun.
	Begin() (StateTxn, error)
	// Restore makes partitions ready, reading their changelogs' tails.
	Restore(ctx context.Context, partitions []int32) error
	// Revoke makes partitions unready, keeping their local state.
	Revoke(partitions []int32)
	// Status is the stores' status for /status, safe from any goroutine.
	Status() any
	// Topics are the stores' changelog topics: required, as the output
	// topic is (a changelog deleted while running stops the processor).
	Topics() []string
	// Journal returns a journal for one worker: what the record it runs
	// writes, to undo when the record fails. maxRecordBytes is the most a
	// record to a topic may take for the producer to send it.
	Journal(maxRecordBytes func(topic string) int) StateJournal
}

// StateJournal is one worker's journal of the state writes of the record
// it runs (*state.Journal through a small adapter). A record's writes
// stand only if the record succeeds: one retried after a retriable error
// runs with its earlier attempt's writes undone, and one that fails for
// good (a later stage of the chain failed it, and it is dead-lettered or
// skipped) leaves the state as it found it.
type StateJournal interface {
	// Store is a store's partition in t, its writes journaled.
	Store(t StateTxn, name string, partition int32) (transform.Store, error)
	// Mark keeps the writes so far and returns the bytes they add to the
	// changelogs.
	Mark() int64
	// Undo reverts the writes since the last Mark.
	Undo()
}

// StateTxn is the state side of one Kafka transaction.
type StateTxn interface {
	// Store is a store's partition in the transaction; the workers call it.
	Store(name string, partition int32) (transform.Store, error)
	// Expire deletes up to limit entries of a store's partition expired
	// by record time now, their tombstones' keys within maxBytes (0: the
	// store's own bound); no worker uses the partition meanwhile. It
	// returns how many it deleted and their key bytes.
	Expire(ctx context.Context, store string, partition int32, now time.Time, limit, maxBytes int) (n, bytes int, err error)
	// ExpireEach is Expire handing each entry it deletes to fn, with its
	// value and expiry, in the order of (expiry, key) across calls
	// (state.Txn.ExpireEach); an error of fn stops it and is returned.
	ExpireEach(ctx context.Context, store string, partition int32, now time.Time, limit, maxBytes int,
		fn func(key, value []byte, expiry time.Time) error) (n, bytes int, err error)
	// Records are the changelog records, produced before the end.
	Records() []*kgo.Record
	// Commit applies the transaction locally after the Kafka commit;
	// Abort discards it.
	Commit() error
	Abort()
}

// StoreScoped is a State that restores and revokes some of its stores
// alone: a chain with a repartition hop keeps the stores before the hop
// partitioned like the input and those after it like the repartition
// topic, each restored for the partitions of its own topic.
type StoreScoped interface {
	RestoreStores(ctx context.Context, stores []string, partitions []int32) error
	RevokeStores(stores []string, partitions []int32)
}

// stateLoop is what the loop knows of the state: the open transaction,
// the partitions restored and the assignment they are of.
type stateLoop struct {
	s      State // nil: the chain keeps no state
	stores []string
	groups []stateGroup // the stores by the topic they are partitioned like
	txn    StateTxn
	epoch  uint64 // the assignment epoch restored
	synced bool   // restored is the assignment of epoch
	// restoring is set while Restore runs: the processor is not ready.
	restoring atomic.Bool
	// behind: the last poll's expiry stopped at a bound with expired
	// entries left; the next poll takes one record (expireState).
	behind bool
	// tables are the join stages' tables (tables.go), restored for the
	// input partitions tparts.
	tables []Table
	tparts []int32
}

// stateGroup is stores partitioned like one topic: partition p of each
// store keeps the state of the records of the topic's partition p.
type stateGroup struct {
	topic  string
	stores []string
	parts  []int32 // the partitions restored
}

// restore restores g's stores for parts: all of them (Restore) when g is
// the loop's one group.
func (st *stateLoop) restore(ctx context.Context, g *stateGroup, parts []int32) error {
	if len(st.groups) == 1 {
		return st.s.Restore(ctx, parts)
	}
	return st.s.(StoreScoped).RestoreStores(ctx, g.stores, parts)
}

// revoke revokes g's restored partitions.
func (st *stateLoop) revoke(g *stateGroup) {
	if len(st.groups) == 1 {
		st.s.Revoke(g.parts)
	} else {
		st.s.(StoreScoped).RevokeStores(g.stores, g.parts)
	}
	g.parts = nil
}

// reads reports whether store is partitioned like topic.
func (st *stateLoop) reads(store, topic string) bool {
	for i := range st.groups {
		if st.groups[i].topic == topic {
			return slices.Contains(st.groups[i].stores, store)
		}
	}
	return false
}

// storeHolder is a worker's transform.Stores: the open transaction's
// stores, scoped to the partition of the record the worker runs.
type storeHolder struct {
	st        *stateLoop
	partition int32
	j         StateJournal
	bytes     int64         // what the last record that succeeded added to the changelogs
	stream    int64         // the stream time of the record it runs (streamtime.go)
	lateTopic string        // Options.LateTopic (late.go)
	lates     []string      // the stores that found the record it runs late (late.go)
	origin    record.Source // the input a repartition record was made from; Topic "" for others
}

// Origin implements transform.Originer for the record the worker runs.
func (h *storeHolder) Origin() (record.Source, bool) { return h.origin, h.origin.Topic != "" }

// Store implements transform.Stores.
func (h *storeHolder) Store(name string) (transform.Store, error) {
	if h.st.txn == nil {
		return nil, fmt.Errorf("store %s: no transaction is open", name)
	}
	return h.j.Store(h.st.txn, name, h.partition)
}

// settle keeps the writes of the record just run, when err is nil, or
// undoes them.
func (h *storeHolder) settle(err error) {
	if err != nil {
		h.j.Undo()
		h.bytes = 0
		return
	}
	h.bytes = h.j.Mark()
}

// initState readies the loop's state, its stores in groups by the topic
// each is partitioned like, and gives every worker a holder.
func (p *Pipeline) initState(s State, stores []string, groups []stateGroup) {
	p.st.s, p.st.stores, p.st.groups = s, stores, groups
	for i := range p.pool.workers {
		p.pool.workers[i].stores = &storeHolder{st: &p.st, j: s.Journal(p.maxRecordBytes)}
	}
}

// maxRecordBytes is the largest record the session Run was handed sends
// to topic (Session.MaxRecordBytes).
func (p *Pipeline) maxRecordBytes(topic string) int { return p.s.MaxRecordBytes(topic) }

// syncState restores the assigned partitions when the assignment changed
// (or a transaction's outcome left the local state behind), between
// transactions and before any of their records is processed.
func (p *Pipeline) syncState(ctx context.Context) error {
	e := p.s.AssignmentEpoch()
	if !p.st.hasState() || p.s.InTxn() || (p.st.synced && e == p.st.epoch) {
		return nil
	}
	p.st.restoring.Store(true)
	defer p.st.restoring.Store(false)
	p.st.synced = false
	for i := range p.st.groups {
		p.st.revoke(&p.st.groups[i])
	}
	assigned := p.observer().Assigned()
	if err := p.restoreTables(ctx, assigned); err != nil {
		return err
	}
	for i := range p.st.groups {
		g := &p.st.groups[i]
		parts := slices.Clone(assigned[g.topic])
		slices.Sort(parts)
		began := time.Now()
		if err := p.st.restore(ctx, g, parts); err != nil {
			return fmt.Errorf("restoring the state of %s partitions %v: %w", g.topic, parts, err)
		}
		g.parts = parts
		p.log.Info("state ready", "topic", g.topic, "partitions", fmt.Sprint(parts), "seconds", time.Since(began).Seconds())
	}
	p.st.epoch, p.st.synced = e, true
	return nil
}

// stateStale reports whether records just polled may be of partitions the
// state has not restored.
func (p *Pipeline) stateStale() bool {
	return p.st.hasState() && (!p.st.synced || p.s.AssignmentEpoch() != p.st.epoch)
}

// stateHolds reports whether the state has restored every partition of
// the state's topics that fs holds records of.
func (p *Pipeline) stateHolds(fs kgo.Fetches) bool {
	holds := true
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		if !p.tablesHold(fp.Topic, fp.Partition) {
			holds = false
		}
		for i := range p.st.groups {
			if g := &p.st.groups[i]; g.topic == fp.Topic && !slices.Contains(g.parts, fp.Partition) {
				holds = false
			}
		}
	})
	return holds
}

// beginState starts the state transaction of the Kafka one just begun.
func (p *Pipeline) beginState() error {
	if p.st.s == nil {
		return nil
	}
	t, err := p.st.s.Begin()
	if err != nil {
		return fmt.Errorf("beginning the state transaction: %w", err)
	}
	p.st.txn = t
	return nil
}

// expireState deletes expired entries of the polled partitions: before
// the workers run (done false) by the stream time as of each one's first
// record in the poll (streamtime.go), and once they are done (done true)
// by the stream time after its last. Every record of the poll runs at
// the first or later, and every record after the poll at the last or
// later, so the entries a record may still use are never expired by it
// (a stateful stage expires an entry only once no record that is not
// late can need it), and a transaction commits no entry that expired by
// its end (expired entries live no longer than a poll). Their tombstones count toward the transaction's
// bytes and stay within what Options.MaxTxnBytes leaves of it; within
// that, a partition's expired entries are deleted up to
// expirePollBytes of keys a poll, in calls of expireCallBytes. When a
// bound stops it with entries left (expiry is behind: a backlog, or
// stream time leapt), the next poll takes one record (pollSize), so
// deletions outrun new keys until it has caught up: the store holds no
// more than what the stages' windows and grace imply, at any input rate.
func (p *Pipeline) expireState(ctx context.Context, fs kgo.Fetches, done bool) error {
	if !done {
		p.st.behind = false
	}
	if p.st.txn == nil || len(p.st.stores) == 0 {
		return nil
	}
	var err error
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 || err != nil {
			return
		}
		now, ok := p.pollTime(fp.Topic, fp.Partition, done)
		if !ok {
			return
		}
		for _, s := range p.st.stores {
			if !p.st.reads(s, fp.Topic) {
				continue
			}
			for spent := 0; ; {
				room := expireCallBytes
				if p.o.MaxTxnBytes > 0 {
					room = min(room, int(p.o.MaxTxnBytes-p.open.counts.bytes))
				}
				if room <= 0 || spent >= expirePollBytes {
					p.st.behind = true
					break
				}
				bytes, limit, e := p.expireStore(ctx, s, fp.Topic, fp.Partition, now, room)
				p.open.counts.bytes += int64(bytes)
				spent += bytes
				if e != nil {
					err = fmt.Errorf("expiring entries of store %s, partition %d: %w", s, fp.Partition, e)
					return
				}
				if bytes < limit {
					break // none left
				}
			}
		}
	})
	return err
}

// expireCallBytes bounds the tombstone key bytes of one Expire call (the
// state's own bound, state.ExpireMaxBytes), and expirePollBytes those
// of one partition and store in one poll, which keeps a poll's expiry
// short within the transaction's time budget.
const (
	expireCallBytes = 1 << 20
	expirePollBytes = 8 << 20
)

// produceState produces the changelog records of a transaction about to
// commit, into it.
func (p *Pipeline) produceState(abort txn.Reason) {
	if p.st.txn == nil || abort != "" {
		return
	}
	for _, r := range p.st.txn.Records() {
		p.s.Produce(p.work, r, record.Source{Topic: r.Topic, Partition: r.Partition, Offset: -1})
	}
}

// settleState applies the ended transaction's state, or discards it. A
// commit that cannot be applied leaves the partitions to restore.
func (p *Pipeline) settleState(committed bool) {
	t := p.st.txn
	if t == nil {
		return
	}
	p.st.txn = nil
	if !committed {
		t.Abort()
		return
	}
	if err := t.Commit(); err != nil {
		p.log.Warn("applying the committed state locally failed; restoring it from the changelogs", "err", err.Error())
		p.st.synced = false
	}
}
