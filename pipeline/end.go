package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// openTxn is the transaction being built: its counts, what identifies
// the outputs in flight (sent.go), the poison entries it applied and the records it blamed, the
// lineage chunks its outputs use, and the context its records run under.
type openTxn struct {
	counts  txnCounts
	sent    sentLog
	applied []record.Source // poison entries this transaction applied
	stamps  []int64         // its input records' timestamps, Unix ms (latency.go)
	// blamed are the records this transaction failed as the ones that
	// held it up; an abort makes them poison, so that their retry does
	// not run them.
	blamed     []blamed
	lineage    *lineage // nil when Options.Lineage is off
	dlqLineage *lineage
	// ctx is the pipeline's work context bounded by the transaction's
	// budget, and cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	seq    uint64 // the transactions begun so far, this one included
}

// newOpenTxn returns the state of a pipeline's transactions, none open:
// with lineage, the lineage headers' chunks too. Dead letters always carry
// lineage, in the form legacy says.
func newOpenTxn(lineage, legacy bool) openTxn {
	o := openTxn{counts: txnCounts{routed: make(map[string]int)}, sent: newSentLog(), dlqLineage: newLineage(legacy),
		ctx: context.Background(), cancel: func() {}}
	if lineage {
		o.lineage = newLineage(legacy)
	}
	return o
}

// txnCounts are the open transaction's counts, reset when it ends.
type txnCounts struct {
	records  int            // input records
	out      int            // outputs to the default topic
	routed   map[string]int // outputs to other topics
	filtered int
	dlq      int
	skipped  int
	bytes    int64          // output bytes (keys, values, headers)
	limited  int            // records failed for running past their limit
	future   int            // records stamped beyond the stream time's bound (streamtime.go)
	late     map[string]int // late records by store (late.go)
}

// reset zeroes the counts, keeping the maps.
func (c *txnCounts) reset() {
	clear(c.routed)
	clear(c.late)
	*c = txnCounts{routed: c.routed, late: c.late}
}

// end ends the open transaction, committing unless abort is set (or a
// produce failed), and accounts for it.
func (p *Pipeline) end(ctx context.Context, abort txn.Reason) (bool, error) {
	p.open.seq++
	if abort == "" && p.o.InjectAbort != nil && p.o.InjectAbort(p.open.seq) {
		abort = txn.ReasonInjected
	}
	p.produceState(abort)
	p.endTime(abort != "")
	start := time.Now()
	committed, err := p.s.End(ctx, p.open.counts.records, abort)
	took := time.Since(start)
	p.settleState(committed)
	p.settleTime(committed)
	failures := p.s.TakeFailures()
	p.open.cancel()
	p.unwatch()
	p.pace.learn(&p.open.counts)
	if committed {
		p.committed(took)
	} else {
		p.stats.aborts.Add(1)
		found, before, txnMax := len(p.open.blamed) > 0, len(p.book.poison), p.pace.max
		// An end that took far longer than its deadline allows was held
		// up by something else (the process was stopped, a rebuild
		// waited for the brokers): the batch's size is not to blame.
		// Shrinking the next transactions is progress, as the
		// watchdog's is: no backoff after it.
		if abort == "" && took >= p.o.TransactionTimeout*9/10 && took <= 2*p.o.TransactionTimeout {
			p.pace.outOfTime(p.open.counts.records, took, p.commitTarget())
			p.log.Warn("committing used up the transaction timeout and did not commit; the next transactions are smaller, sized by what commits in time",
				"records", p.open.counts.records, "took", took.Round(time.Millisecond).String(), "next_max_records", p.pace.max)
		}
		p.book.blame(p.open.blamed)
		if perr := p.notePoison(ctx, failures); perr != nil && err == nil {
			err = perr
		}
		// An abort that found a record at fault (or shrank the next
		// transaction to find one) made progress: its retry goes without it.
		if !found && len(p.book.poison) <= before && p.pace.max >= txnMax {
			p.health.noteAbort(abort)
			defer p.health.abortBackoff(ctx)
		}
	}
	p.open.reset(!p.s.InTxn())
	p.stats.openRecords.Store(0)
	return committed, err
}

// committed accounts for the transaction that just committed, whose end
// took took: the record metrics and counters, the poison entries it
// applied, the next transaction's size, the committed offsets, and the
// end of a run of aborts.
func (p *Pipeline) committed(took time.Duration) {
	p.observeCommitted(time.Now().UnixMilli())
	c := &p.open.counts
	m := p.o.Metrics
	m.Consumed.Add(float64(c.records))
	m.Filtered.Add(float64(c.filtered))
	m.DLQ.Add(float64(c.dlq))
	m.Skipped.Add(float64(c.skipped))
	m.Future.Add(float64(c.future))
	for s, n := range c.late {
		m.Late.WithLabelValues(s).Add(float64(n))
	}
	p.countCrashed()
	p.book.forget(p.open.applied)
	p.book.aloneSet = false
	p.pace.grow(p.o.MaxRecordsPerTxn, c.records, took, p.commitTarget())
	out := c.out
	if c.out > 0 {
		m.Produced.WithLabelValues(p.o.OutputTopic).Add(float64(c.out))
	}
	for t, n := range c.routed {
		m.Produced.WithLabelValues(t).Add(float64(n))
		out += n
	}
	p.stats.consumed.Add(uint64(c.records))
	p.stats.produced.Add(uint64(out))
	p.stats.commits.Add(1)
	p.stats.filtered.Add(uint64(c.filtered))
	p.stats.dlq.Add(uint64(c.dlq))
	p.stats.skipped.Add(uint64(c.skipped))
	p.parts.committed(p.observer().CommittedOffsets())
	p.purgeHop()
	p.health.failing.Store(nil)
	p.health.outage.Store(nil)
}

// reset readies o for the next transaction: it drops the ended one's
// counts and its outputs' entries, and, when done (no transaction is open:
// every record of the ended one is done), reuses the lineage chunks.
func (o *openTxn) reset(done bool) {
	clear(o.blamed)
	o.blamed = o.blamed[:0]
	o.sent.reset()
	o.applied = o.applied[:0]
	o.stamps = o.stamps[:0]
	o.counts.reset()
	if done {
		if o.lineage != nil {
			o.lineage.reset()
		}
		o.dlqLineage.reset()
	}
}

// shutdown commits the open transaction with a fresh deadline.
func (p *Pipeline) shutdown() error {
	if !p.s.InTxn() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.o.TransactionTimeout)
	defer cancel()
	committed, err := p.end(ctx, "")
	if err != nil {
		return fmt.Errorf("committing the last transaction at shutdown: %w", err)
	}
	p.log.Info("shutting down: last transaction ended", "committed", committed)
	return nil
}
