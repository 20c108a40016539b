package pipeline

import (
	"context"
	"fmt"

	"github.com/streamproc/processor/txn"
)

// txnCounts are the open transaction's counts, reset when it ends.
type txnCounts struct {
	records  int            // input records
	out      int            // outputs to the default topic
	routed   map[string]int // outputs to other topics
	filtered int
	dlq      int
	skipped  int
	bytes    int64 // output bytes (keys, values, headers)
	limited  int   // records failed for running past their limit
}

// reset zeroes the counts, keeping the routed map.
func (c *txnCounts) reset() {
	clear(c.routed)
	*c = txnCounts{routed: c.routed}
}

// end ends the open transaction, committing unless abort is set (or a
// produce failed), and accounts for it.
func (p *Pipeline) end(ctx context.Context, abort txn.Reason) (bool, error) {
	p.seq++
	if abort == "" && p.o.InjectAbort != nil && p.o.InjectAbort(p.seq) {
		abort = txn.ReasonInjected
	}
	committed, err := p.s.End(ctx, p.cur.records, abort)
	failures := p.s.TakeFailures()
	p.txnCancel()
	p.unwatch()
	if p.cur.records > 0 {
		p.perRecord, p.sized = p.cur.bytes/int64(p.cur.records), true
	}
	if committed {
		m := p.o.Metrics
		m.Consumed.Add(float64(p.cur.records))
		m.Filtered.Add(float64(p.cur.filtered))
		m.DLQ.Add(float64(p.cur.dlq))
		m.Skipped.Add(float64(p.cur.skipped))
		for _, src := range p.applied {
			delete(p.poison, src) // handled; a rebalance may hand leftovers to another instance, which finds them itself
		}
		p.txnMax = min(p.o.MaxRecordsPerTxn, p.txnMax*2)
		out := p.cur.out
		if p.cur.out > 0 {
			m.Produced.WithLabelValues(p.o.OutputTopic).Add(float64(p.cur.out))
		}
		for t, n := range p.cur.routed {
			m.Produced.WithLabelValues(t).Add(float64(n))
			out += n
		}
		p.consumed.Add(uint64(p.cur.records))
		p.produced.Add(uint64(out))
		p.commits.Add(1)
		p.parts.committed(p.obs.CommittedOffsets())
		p.failing.Store(nil)
	} else {
		p.aborts.Add(1)
		found, before, txnMax := len(p.blamed) > 0, len(p.poison), p.txnMax
		for _, b := range p.blamed {
			p.poison[b.src] = poison{failure: b.failure}
		}
		if perr := p.notePoison(ctx, failures); perr != nil && err == nil {
			err = perr
		}
		// An abort that found a record at fault (or shrank the next
		// transaction to find one) made progress: its retry goes without it.
		if !found && len(p.poison) <= before && p.txnMax >= txnMax {
			p.noteAbort(abort)
			defer p.abortBackoff(ctx)
		}
	}
	clear(p.blamed)
	p.blamed = p.blamed[:0]
	clear(p.inflight) // drop the record pointers
	p.inflight = p.inflight[:0]
	p.applied = p.applied[:0]
	p.cur.reset()
	p.openRecords.Store(0)
	if !p.s.InTxn() { // every record of the ended transaction is done
		if p.lineage != nil {
			p.lineage.reset()
		}
		p.dlqLineage.reset()
	}
	return committed, err
}

// shutdown commits the open transaction with a fresh deadline.
func (p *Pipeline) shutdown() error {
	if !p.s.InTxn() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.o.StallTimeout)
	defer cancel()
	committed, err := p.end(ctx, "")
	if err != nil {
		return fmt.Errorf("committing the last transaction at shutdown: %w", err)
	}
	p.log.Info("shutting down: last transaction ended", "committed", committed)
	return nil
}
