package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// One slow record is found by watching each worker's record in the chain,
// not by halving the transaction until the record is alone in it:
//
//   - A record that has run for its limit (recordLimit: half the
//     transaction's budget, or its own worst case by the configured
//     deadlines if that is longer) is cut: its context ends with a
//     *limitError, and it fails under the policy where it stands, while
//     the transaction goes on.
//   - A record that was running when the budget ran out, and had been for
//     at least half of it, is blamed the same way (the transaction is
//     aborted once, and its retry fails that record alone); a record that
//     had run for less is no culprit, and the transaction shrinks as
//     before.
//   - A record whose transform does not return once its context has ended
//     holds its worker, and the transaction, until it does: the instance
//     reports itself unhealthy naming the record and the chain entry,
//     until it returns.
//
// The per-record cost is two atomic operations on the worker's own slot;
// the monitor runs on a timer only while a transaction is open longer
// than a tick, which an ordinary transaction never is.

// minTick is the shortest interval at which the monitor looks.
const minTick = 5 * time.Millisecond

// slot is what a worker publishes about the record it is running: the
// worker writes it, the monitor reads it.
type slot struct {
	// seq is odd while topic and part change (at the start of a batch).
	seq   atomic.Uint64
	topic atomic.Pointer[string]
	part  atomic.Int32
	// off is the running record's offset plus one, 0 when none runs, and
	// minus that when the monitor has cut the record.
	off atomic.Int64
	// cancel ends the worker's context; the monitor calls it with a
	// *limitError to cut the record.
	cancel atomic.Pointer[context.CancelCauseFunc]
	// stuck is the error the monitor reports while the record does not
	// return after its context ended.
	stuck atomic.Pointer[error]
}

// publish says that the worker's next records are of partition part of
// topic.
func (s *slot) publish(topic *string, part int32) {
	s.seq.Add(1)
	s.topic.Store(topic)
	s.part.Store(part)
	s.seq.Add(1)
}

// renew gives w a fresh context under parent, for its records from now on.
func (w *worker) renew(parent context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	w.ctx = ctx
	if w.stores != nil {
		w.ctx = transform.WithStores(ctx, w.stores)
	}
	w.slot.cancel.Store(&cancel)
}

// limitError fails a record that ran for its limit.
type limitError struct {
	ran    time.Duration // how long it ran, at least
	limit  time.Duration // the limit it ran into (0: the budget ran out)
	budget time.Duration
	names  settingNames // the settings to change, as the user sets them
}

func (e *limitError) Error() string {
	if e.limit == 0 {
		return fmt.Sprintf("the record did not finish within the transaction's time budget of %s: it had been running for %s when the budget ran out "+
			"(bound the transform with %s, or raise %s)", e.budget, e.ran.Round(time.Millisecond), e.names.transformTimeout, e.names.transactionTimeout)
	}
	return fmt.Sprintf("the record did not finish within %s, its limit with a transaction time budget of %s "+
		"(bound the transform with %s, or raise %s)", e.limit, e.budget, e.names.transformTimeout, e.names.transactionTimeout)
}

// limitCause returns the *limitError that ended ctx, if one did.
func limitCause(ctx context.Context) *limitError {
	if ctx.Err() == nil {
		return nil
	}
	le, _ := context.Cause(ctx).(*limitError)
	return le
}

// stuckError is the health of an instance whose transform does not return.
type stuckError struct {
	src   record.Source
	entry transform.Entry
	ran   time.Duration
	since time.Duration
	// timeout is TransformTimeout's name, as the user sets it.
	timeout string
}

func (e *stuckError) Error() string {
	return fmt.Sprintf("record topic %s partition %d offset %d has been in transform %s for %s and has not returned %s after its context ended: "+
		"the transform ignores its context and holds the transaction until it returns (%s cannot end it either); fix the transform",
		e.src.Topic, e.src.Partition, e.src.Offset, e.entry, e.ran.Round(time.Millisecond), e.since.Round(time.Millisecond), e.timeout)
}

// monitor watches the workers' slots while a transaction is open: it cuts
// a record that has run for limit, looking every tick.
type monitor struct {
	limit time.Duration
	tick  time.Duration

	mu    sync.Mutex
	t     *time.Timer
	on    bool
	began time.Time
	seen  []sighting // per worker
}

// newMonitor returns the monitor of workers workers, which cuts records at
// limit.
func newMonitor(limit time.Duration, workers int) monitor {
	return monitor{limit: limit, tick: max(limit/8, minTick), seen: make([]sighting, workers)}
}

// sighting is the record the monitor last saw a worker run.
type sighting struct {
	seq   uint64
	topic *string
	part  int32
	off   int64 // offset + 1
	since time.Time
	last  time.Time // the last look that saw it running
	ended time.Time // when its context ended: cut, or the budget ran out
}

// recordLimit is how long one record may run, all its attempts together,
// before it is known to be the culprit: half the transaction's budget, or
// its worst case by the configured deadlines (which CheckBudget keeps
// within the budget) if that is longer, with an eighth more (within the
// budget) for the scheduling between attempts, so that a record that
// uses every deadline it is given is not cut for a few milliseconds.
func recordLimit(o Options, chain *transform.Chain) time.Duration {
	worst, _, _ := worstCase(o, chain)
	return max(o.TxnBudget/2, min(worst+worst/8, o.TxnBudget))
}

// watch starts watching the transaction just begun, with fresh contexts
// for the workers.
func (p *Pipeline) watch() {
	for i := range p.pool.workers {
		p.pool.workers[i].renew(p.open.ctx)
	}
	m := &p.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	m.on, m.began = true, p.s.Begun()
	clear(m.seen)
	if m.t == nil {
		m.t = time.AfterFunc(p.mon.tick, p.look)
	} else {
		m.t.Reset(p.mon.tick)
	}
}

// unwatch stops watching: the transaction has ended.
func (p *Pipeline) unwatch() {
	m := &p.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	m.on = false
	if m.t != nil {
		m.t.Stop()
	}
}

// look is one look at the workers: it cuts records that have run for
// their limit and reports those that do not return.
func (p *Pipeline) look() {
	m := &p.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on {
		return
	}
	now := time.Now()
	budgetEnd := m.began.Add(p.o.TxnBudget)
	for i := range p.pool.workers {
		w := &p.pool.workers[i]
		s, sn := &w.slot, &m.seen[i]
		seq, v := s.seq.Load(), s.off.Load()
		if v == 0 || seq%2 == 1 {
			continue
		}
		off := max(v, -v)
		if sn.seq != seq || sn.off != off {
			topic, part := s.topic.Load(), s.part.Load()
			if s.seq.Load() != seq || topic == nil {
				continue // a new batch began meanwhile
			}
			*sn = sighting{seq: seq, topic: topic, part: part, off: off, since: now}
		}
		sn.last = now
		src := record.Source{Topic: *sn.topic, Partition: sn.part, Offset: off - 1}
		if v > 0 && now.Sub(sn.since) >= p.mon.limit {
			if c := s.cancel.Load(); c != nil && s.off.CompareAndSwap(v, -v) {
				(*c)(&limitError{ran: now.Sub(sn.since), limit: p.mon.limit, budget: p.o.TxnBudget, names: p.names})
				sn.ended = now
				p.log.Warn("a record has run for its limit; it fails under "+p.names.onError,
					"topic", src.Topic, "partition", src.Partition, "offset", src.Offset, "transform", p.runningIn(w, src.Topic).String(),
					"limit", p.mon.limit.String(), "policy", string(p.o.OnError))
			}
		}
		if sn.ended.IsZero() && !now.Before(budgetEnd) {
			sn.ended = budgetEnd
			if sn.since.After(budgetEnd) {
				sn.ended = sn.since
			}
		}
		if !sn.ended.IsZero() && now.Sub(sn.ended) >= p.mon.tick && s.stuck.Load() == nil {
			var err error = &stuckError{src: src, entry: p.runningIn(w, src.Topic), ran: now.Sub(sn.since), since: now.Sub(sn.ended),
				timeout: p.names.transformTimeout}
			s.stuck.Store(&err)
			p.log.Error("a transform does not return after its context ended", "err", err.Error())
			if s.off.Load() != v { // it returned meanwhile
				p.unstick(s)
			}
		}
		if st := s.stuck.Load(); st != nil {
			p.health.report(st, now)
		}
	}
	m.t.Reset(p.mon.tick)
}

// unstick withdraws the report of s's record not returning: it has.
func (p *Pipeline) unstick(s *slot) {
	if st := s.stuck.Swap(nil); st != nil {
		p.health.withdraw(st)
	}
}

// ranFor returns how long the monitor saw src run in this transaction, at
// least; 0 when it did not see it.
func (p *Pipeline) ranFor(src record.Source) time.Duration {
	m := &p.mon
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sn := range m.seen {
		if sn.topic != nil && sn.off == src.Offset+1 && sn.part == src.Partition && *sn.topic == src.Topic {
			return sn.last.Sub(sn.since)
		}
	}
	return 0
}

// run runs r through w's chain (runChain), with r published in w's slot
// for the monitor; a record the monitor cut leaves w a fresh context.
func (p *Pipeline) run(w *worker, src record.Source, r *kgo.Record, dst []*kgo.Record) (out []*kgo.Record, stage string, attempts int, err error) {
	s, v := &w.slot, src.Offset+1
	if w.stores != nil {
		w.stores.partition = src.Partition
		w.stores.lates = w.stores.lates[:0]
		w.stores.origin = record.Source{}
		if p.fromHop(src.Topic) {
			w.stores.origin = p.origin(src, r)
		}
	}
	s.off.Store(v)
	if p.o.InjectCrash != nil {
		p.o.InjectCrash(r)
	}
	out, stage, attempts, err = p.runChain(w, src, r, dst)
	if w.stores != nil {
		w.stores.settle(err)
	}
	if !s.off.CompareAndSwap(v, 0) {
		s.off.Store(0)
		w.renew(p.open.ctx)
	}
	if s.stuck.Load() != nil {
		p.unstick(s)
	}
	return out, stage, attempts, err
}
