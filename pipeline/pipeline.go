// Package pipeline is the processor's loop: poll input records, run each
// through the transform chain, produce the outputs, and end the transaction
// after Options.CommitInterval or Options.MaxRecordsPerTxn input records,
// whichever comes first. The per-record path takes no locks,
// allocates nothing of its own and does not log.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// Pipeline runs the consume-transform-produce loop on one session, the one
// Run is handed.
type Pipeline struct {
	s     Session                  // Run's; the loop's goroutine's
	obs   atomic.Pointer[Observer] // Run's; nil before Run (observer)
	chain *transform.Chain
	o     Options
	log   *slog.Logger
	names settingNames // the settings messages name, as the user sets them

	// The loop's goroutine's (and the workers', while it waits for them).
	pool pool       // the workers and the poll they share
	open openTxn    // the transaction being built
	pace pace       // how many records the next transaction and poll take
	book poisonBook // what earlier attempts learnt about records and topics
	mon  monitor    // watches the workers' records while a transaction is open

	// work is the context records are processed and produced under: a
	// stop does not cancel it, so a shutdown never fails a record; it
	// ends TxnBudget after the stop, when the open transaction's budget
	// has run out anyway, so a produce blocked on a full buffer cannot hold
	// up the shutdown. open.ctx is work bounded by the open transaction's
	// budget: every record's deadline.
	work context.Context

	st    stateLoop // the stores of a stateful chain
	clock clock     // the input partitions' stream times (streamtime.go)
	hop   *hop      // the repartition hop, nil without one

	// Read by other goroutines.
	stats  counters
	health health
	parts  *partitions // also read by Status and the refresher
	// latency is a sample of recent end-to-end latencies, for Status.
	latency *latencyWindow
	// retryWait draws the waits between a record's attempts (retryPolicy);
	// workers share it.
	retryWait *backoff.Backoff
}

// pace is how large transactions and polls are: a transaction's record
// bound, which the watchdog halves and commits double back, and the
// output bytes per input record, which size polls under the byte bound.
type pace struct {
	max       int   // input records per transaction
	perRecord int64 // output bytes per input record in the last transaction
	sized     bool  // perRecord has been measured
}

// Run runs the loop on session s, whose status, health and lag it reads
// through obs (a *txn.Session is both): it initialises the session, then
// loops until ctx ends or a fatal error. On ctx's end it stops polling,
// finishes the records already polled (within the open transaction's time
// budget), commits the open transaction and leaves the group, and returns
// nil. Ending ctx is never a record failure. The session is closed when
// Run returns. Run a pipeline once.
func (p *Pipeline) Run(ctx context.Context, s Session, obs Observer) (err error) {
	if p.s != nil {
		s.Close()
		return errors.New("pipeline: Run called twice")
	}
	p.attach(s, obs)
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopWork := context.AfterFunc(ctx, func() { time.AfterFunc(p.o.TxnBudget, cancelWork) })
	defer stopWork()
	p.work = work
	defer func() {
		if err != nil {
			p.health.fail(err)
		}
		p.health.running.Store(false)
		p.unwatch()
		p.s.Close()
	}()
	p.health.tick()
	p.health.running.Store(true)
	if err := p.s.Init(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := p.checkTopics(ctx); err != nil {
		return err
	}
	p.health.initialised.Store(true)
	bg, stopBg := context.WithCancel(ctx)
	defer stopBg()
	go p.refreshEnds(bg, p.o.EndOffsetsInterval)
	if p.o.ProgressInterval > 0 {
		go p.progress(bg)
	}
	for ctx.Err() == nil {
		p.health.tick()
		if err := p.step(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				break
			}
			return err
		}
	}
	return p.shutdown()
}

// attach hands the pipeline the session it runs on.
func (p *Pipeline) attach(s Session, obs Observer) {
	p.s = s
	p.obs.Store(&obs)
}

// observer is the read-only view of the session Run was handed, nil
// before Run.
func (p *Pipeline) observer() Observer {
	if o := p.obs.Load(); o != nil {
		return *o
	}
	return nil
}

// step polls once, processes what arrived and ends the transaction when it
// is due.
func (p *Pipeline) step(ctx context.Context) error {
	if err := p.syncState(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Second) // idle: wake up to stay healthy
	if p.s.InTxn() {
		deadline = p.due()
	}
	pctx, cancel := context.WithDeadline(ctx, deadline)
	fs := p.s.Poll(pctx, p.pollSize())
	cancel()
	p.observe(fs)
	if rewound, err := p.oversized(ctx, fs.NumRecords()); rewound {
		return err
	}

	if fs.NumRecords() > 0 && p.stateStale() {
		if p.s.InTxn() { // the abort rewinds: the records are fetched again
			return p.rewind(ctx)
		}
		if err := p.syncState(ctx); err != nil {
			return err
		}
		// Polled before a rebalance that took some of their partitions:
		// the state has not those, and their new owners read them.
		if !p.stateHolds(fs) {
			return p.rewind(ctx)
		}
	}
	if fs.NumRecords() > 0 {
		if !p.s.InTxn() {
			if err := p.s.Begin(ctx); err != nil {
				if errors.Is(err, txn.ErrRebuilt) {
					return nil // the new client fetches these records again
				}
				return err
			}
			p.open.ctx, p.open.cancel = context.WithDeadline(p.work, p.budgetEnd())
			p.watch()
			if err := p.beginState(); err != nil {
				return err
			}
		}
		p.attempt(p.work, fs) // not ctx: a stop must not fail a marker
		p.advanceTime(fs)
		err := p.expireState(ctx, fs, false)
		if err == nil {
			err = p.process(fs)
		}
		if err == nil {
			err = p.expireState(ctx, fs, true)
		}
		p.stats.openRecords.Store(int64(p.open.counts.records))
		var de *dependencyError
		switch {
		case errors.Is(err, errWatchdog):
			return p.outOfBudget(ctx)
		case errors.As(err, &de) && transform.IsUnavailable(err):
			return p.unavailable(ctx, de)
		case err != nil:
			if _, endErr := p.end(ctx, txn.ReasonTransform); endErr != nil {
				p.log.Error("aborting the transaction failed", "err", endErr.Error())
			}
			return err
		}
	}
	c := &p.open.counts
	if p.s.InTxn() && (c.records >= p.pace.max || (p.o.MaxTxnBytes > 0 && c.bytes >= p.o.MaxTxnBytes) ||
		!time.Now().Before(p.due()) || p.solo()) {
		if _, err := p.end(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

// rewind drops what the polls of the open transaction, or the last poll,
// brought, by an abort: the session goes back to the committed offsets,
// and the records are fetched again, those of partitions revoked since by
// their new owners.
func (p *Pipeline) rewind(ctx context.Context) error {
	if p.s.InTxn() {
		_, err := p.end(ctx, txn.ReasonRebalance)
		return err
	}
	if err := p.s.Begin(ctx); err != nil {
		if errors.Is(err, txn.ErrRebuilt) {
			return nil // the new client fetches them again
		}
		return err
	}
	_, err := p.s.End(ctx, 0, txn.ReasonRebalance)
	return err
}

// outOfBudget aborts the transaction whose processing used up its time
// budget: once, when the record that held it up is known (its retry fails
// it, and the others fit as they did); otherwise the transactions shrink.
func (p *Pipeline) outOfBudget(ctx context.Context) error {
	done := p.open.counts.records
	if p.open.counts.limited > 0 {
		p.log.Warn("processing used up the transaction's time budget, held up by a record that ran past its limit; "+
			"aborting it once: its retry applies "+p.names.onError+" to that record",
			"budget", p.o.TxnBudget.String(), "records_done", done, "records_blamed", p.open.counts.limited)
	} else {
		p.pace.halve(done)
		p.log.Warn("processing used up the transaction's time budget; aborting it and retrying with smaller transactions",
			"budget", p.o.TxnBudget.String(), "records_done", done, "next_max_records", p.pace.max)
	}
	_, err := p.end(ctx, txn.ReasonWatchdog)
	return err
}

// due is when the open transaction ends: after the commit interval, or at
// the end of its time budget if that comes first (a commit interval close
// to the transaction timeout must not let an idle transaction run into
// the watchdog).
func (p *Pipeline) due() time.Time {
	return p.s.Begun().Add(min(p.o.CommitInterval, p.o.TxnBudget))
}

// pollSize is how many records the next poll may return (pace.pollSize):
// one while the session suspects a record of killing the process, or
// while the state's expiry is behind (expireState).
func (p *Pipeline) pollSize() int {
	if p.solo() || p.st.behind {
		return 1
	}
	return p.pace.pollSize(&p.open.counts, p.o.MaxTxnBytes)
}

// maxPoll bounds the records of one poll. A poll's records are alive
// until the loop has produced the last of them, and each keeps the fetched
// batch it came from: a 100,000-record poll on a backlog would hold the
// whole transaction's input (and the client fetches the next while it is
// produced). Smaller polls let the client release a batch once its
// outputs are acknowledged, as the bare copier's 10,000-record polls do.
const maxPoll = 10_000

// pollSize is how many records the next poll may return, with c the open
// transaction's counts: what is left of the transaction's record count
// and of its byte bound maxBytes (0: none), at the bytes per record seen
// so far (one record, to learn them, before any was seen), and at most
// maxPoll.
func (pc *pace) pollSize(c *txnCounts, maxBytes int64) int {
	n := min(maxPoll, pc.max-c.records)
	if maxBytes > 0 {
		per := pc.perRecord
		if c.records > 0 {
			per = max(per, c.bytes/int64(c.records))
		}
		switch {
		case per > 0:
			n = min(n, int(max(1, (maxBytes-c.bytes)/per)))
		case !pc.sized && c.records == 0:
			n = 1
		}
	}
	return max(1, n)
}

// learn measures the output bytes per input record of the transaction
// that just ended, with counts c.
func (pc *pace) learn(c *txnCounts) {
	if c.records > 0 {
		pc.perRecord, pc.sized = c.bytes/int64(c.records), true
	}
}

// halve bounds the next transaction to half of the done records the
// watchdog's abort found fit, at least one.
func (pc *pace) halve(done int) { pc.max = max(1, done/2) }

// grow sets the record bound after a commit of n records whose end took
// took: double, up to limit, while ends are quick; once an end takes
// more than half of target, the records the measured rate ends in target
// (at most double). So a destination whose commit time grows with the
// batch (a statement run per row, a slow disk) is fed batches it commits
// in about target, whatever the backlog, and the bound grows back as its
// commits speed up.
func (pc *pace) grow(limit, n int, took, target time.Duration) {
	next := pc.max * 2
	if took > target/2 && n > 0 {
		next = min(next, fit(n, took, target))
	}
	pc.max = min(limit, next)
}

// outOfTime bounds the next transactions after the end of one of n
// records used up the transaction timeout without committing (took): to
// what would end in target at that rate, a lower bound on the true time
// per record (the end was cut short), which grow then corrects from the
// commits that follow. Retried with the same size, such a transaction
// would fail the same way for as long as the backlog lasts.
func (pc *pace) outOfTime(n int, took, target time.Duration) {
	pc.max = max(1, min(pc.max, fit(n, took, target)))
}

// fit is how many records end in target when n took took, at least one.
func fit(n int, took, target time.Duration) int {
	return int(max(1, int64(n)*int64(target)/int64(max(took, time.Millisecond))))
}

// commitTarget is how long ending a transaction should take: a quarter of
// the transaction timeout, what the end of a transaction may use before
// it is cut short, so that a destination slower from one batch to the
// next still commits.
func (p *Pipeline) commitTarget() time.Duration { return p.o.TransactionTimeout / 4 }

// observe tracks the partitions once per poll: the assignment when it
// changed (with the offsets the group committed for it), and the
// positions and end offsets the poll brought.
func (p *Pipeline) observe(fs kgo.Fetches) {
	if e := p.s.AssignmentEpoch(); e != p.parts.epoch {
		p.parts.epoch = e
		obs := p.observer()
		p.parts.assign(obs.Assigned())
		p.parts.committed(obs.CommittedOffsets())
	}
	p.parts.fetched(fs)
}
