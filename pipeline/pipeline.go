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
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// Pipeline runs the consume-transform-produce loop on one session.
type Pipeline struct {
	s     Session
	obs   Observer
	chain *transform.Chain
	o     Options
	log   *slog.Logger

	// Loop-goroutine state.
	workers []worker // workers[0] runs chain, on the loop's goroutine when a poll is not shared
	batches []batch  // the last poll's records, in runs of one partition's
	results []result // the workers' outcomes, one per record of batches

	// The workers' coordination within one poll (see startWorkers).
	next       atomic.Int64  // the next batch to take
	halt       atomic.Bool   // run no more records
	done       []atomic.Bool // per batch: its records have run
	ready      chan struct{} // a batch is done since the loop last looked
	wg         sync.WaitGroup
	lineage    *lineage  // nil when Options.Lineage is off
	cur        txnCounts // the open transaction's counts
	seq        uint64
	txnMax     int   // input records per transaction: the watchdog halves it, commits double it back
	perRecord  int64 // output bytes per input record in the last transaction, to size polls
	sized      bool  // perRecord has been measured
	inflight   []inflight
	poison     map[transform.Source]poison
	applied    []transform.Source   // poison entries this transaction applied
	missing    map[string]time.Time // destination topics the cluster confirmed missing, and when
	dlqLineage *lineage
	parts      *partitions        // also read by Status and the refresher
	partsEpoch uint64             // the session's assignment epoch parts reflects
	topicNames map[string]*string // input topic names, for the workers' slots
	names      settingNames       // the settings messages name, as the user sets them

	// The monitor (watch.go): it cuts a record that has run for limit,
	// looking every tick while a transaction is open. blamed are the
	// records this transaction failed as the ones that held it up; an
	// abort makes them poison, so that their retry does not run them.
	mon    monitor
	limit  time.Duration
	tick   time.Duration
	blamed []blamed

	// work is the context records are processed and produced under: a
	// stop does not cancel it, so a shutdown never fails a record; it
	// ends TxnBudget after the stop, when the open transaction's budget
	// has run out anyway, so a produce blocked on a full buffer cannot hold
	// up the shutdown. txn is work bounded by the open transaction's
	// budget: every record's deadline.
	work      context.Context
	txn       context.Context
	txnCancel context.CancelFunc

	// Read by other goroutines.
	lastLoop    atomic.Int64 // unix nanos of the loop's last iteration
	running     atomic.Bool
	consumed    atomic.Uint64
	produced    atomic.Uint64
	commits     atomic.Uint64
	aborts      atomic.Uint64
	openRecords atomic.Int64 // input records of the open transaction, as of the last poll
	failure     atomic.Pointer[error]
	failedAt    atomic.Int64 // unix nanoseconds
	initialised atomic.Bool
	// failing is the run of transactions aborted since the last commit,
	// nil when the last one committed (see noteAbort).
	failing atomic.Pointer[abortRun]
}

// Run initialises the session, then loops until ctx ends or a fatal error.
// On ctx's end it stops polling, finishes the records already polled
// (within the open transaction's time budget), commits the open
// transaction and leaves the group, and returns nil. Ending ctx is never a
// record failure. The session is closed when Run returns.
func (p *Pipeline) Run(ctx context.Context) (err error) {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopWork := context.AfterFunc(ctx, func() { time.AfterFunc(p.o.TxnBudget, cancelWork) })
	defer stopWork()
	p.work = work
	defer func() {
		if err != nil {
			p.failedAt.Store(time.Now().UnixNano())
			p.failure.Store(&err)
		}
		p.running.Store(false)
		p.unwatch()
		p.s.Close()
	}()
	p.lastLoop.Store(time.Now().UnixNano())
	p.running.Store(true)
	if err := p.s.Init(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := p.checkTopics(ctx); err != nil {
		return err
	}
	p.initialised.Store(true)
	bg, stopBg := context.WithCancel(ctx)
	defer stopBg()
	go p.refreshEnds(bg, p.o.EndOffsetsInterval)
	if p.o.ProgressInterval > 0 {
		go p.progress(bg)
	}
	for ctx.Err() == nil {
		p.lastLoop.Store(time.Now().UnixNano())
		if err := p.step(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				break
			}
			return err
		}
	}
	return p.shutdown()
}

// step polls once, processes what arrived and ends the transaction when it
// is due.
func (p *Pipeline) step(ctx context.Context) error {
	deadline := time.Now().Add(time.Second) // idle: wake up to stay healthy
	if p.s.InTxn() {
		deadline = p.due()
	}
	pctx, cancel := context.WithDeadline(ctx, deadline)
	fs := p.s.Poll(pctx, p.pollSize())
	cancel()
	p.observe(fs)

	if fs.NumRecords() > 0 {
		if !p.s.InTxn() {
			if err := p.s.Begin(ctx); err != nil {
				if errors.Is(err, txn.ErrRebuilt) {
					return nil // the new client fetches these records again
				}
				return err
			}
			p.txn, p.txnCancel = context.WithDeadline(p.work, p.budgetEnd())
			p.watch()
		}
		err := p.process(fs)
		p.openRecords.Store(int64(p.cur.records))
		switch {
		case errors.Is(err, errWatchdog):
			done := p.cur.records
			if p.cur.limited > 0 {
				// The record that held it up is known: its retry fails it,
				// and the others fit as they did.
				p.log.Warn("processing used up the transaction's time budget, held up by a record that ran past its limit; "+
					"aborting it once: its retry applies "+p.names.onError+" to that record",
					"budget", p.o.TxnBudget.String(), "records_done", done, "records_blamed", p.cur.limited)
			} else {
				p.txnMax = max(1, done/2)
				p.log.Warn("processing used up the transaction's time budget; aborting it and retrying with smaller transactions",
					"budget", p.o.TxnBudget.String(), "records_done", done, "next_max_records", p.txnMax)
			}
			_, err := p.end(ctx, txn.ReasonWatchdog)
			return err
		case err != nil:
			if _, endErr := p.end(ctx, txn.ReasonTransform); endErr != nil {
				p.log.Error("aborting the transaction failed", "err", endErr.Error())
			}
			return err
		}
	}
	if p.s.InTxn() && (p.cur.records >= p.txnMax || (p.o.MaxTxnBytes > 0 && p.cur.bytes >= p.o.MaxTxnBytes) ||
		!time.Now().Before(p.due())) {
		if _, err := p.end(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

// due is when the open transaction ends: after the commit interval, or at
// the end of its time budget if that comes first (a commit interval close
// to the transaction timeout must not let an idle transaction run into
// the watchdog).
func (p *Pipeline) due() time.Time {
	return p.s.Begun().Add(min(p.o.CommitInterval, p.o.TxnBudget))
}

// pollSize is how many records the next poll may return: what is left of
// the transaction's record count and of its byte bound, at the bytes per
// record seen so far (one record, to learn them, before any was seen).
func (p *Pipeline) pollSize() int {
	n := p.txnMax - p.cur.records
	if p.o.MaxTxnBytes > 0 {
		per := p.perRecord
		if p.cur.records > 0 {
			per = max(per, p.cur.bytes/int64(p.cur.records))
		}
		switch {
		case per > 0:
			n = min(n, int(max(1, (p.o.MaxTxnBytes-p.cur.bytes)/per)))
		case !p.sized && p.cur.records == 0:
			n = 1
		}
	}
	return max(1, n)
}

// observe tracks the partitions once per poll: the assignment when it
// changed (with the offsets the group committed for it), and the
// positions and end offsets the poll brought.
func (p *Pipeline) observe(fs kgo.Fetches) {
	if e := p.s.AssignmentEpoch(); e != p.partsEpoch {
		p.partsEpoch = e
		p.parts.assign(p.obs.Assigned())
		p.parts.committed(p.obs.CommittedOffsets())
	}
	p.parts.fetched(fs)
}
