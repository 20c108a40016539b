package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// How the stored committer ends a batch.

// end ends a batch: unless abort is set, it commits the rows, dead
// letters and offsets in one transaction of the destination and then
// copies the offsets to the group; otherwise, or when the commit fails,
// it rewinds to the batch's first offsets (to the stored ones for fenced
// partitions). It returns whether the batch committed, the abort reason,
// and why; a *sink.PersistentError when committing cannot succeed (End
// returns it: the processor stops), any other error when the session
// must be rebuilt.
func (d *stored) end(ctx context.Context, abort Reason, _ time.Time) (bool, Reason, string, error) {
	defer func() {
		d.rows.reset()
		d.batch.cl.AllowRebalance()
	}()
	d.batch.open = false
	if abort != "" {
		return false, abort, "", d.rewind(nil)
	}
	batch := d.batchToCommit()
	err := d.dest.Commit(ctx, batch)
	if err == nil {
		d.committedBatch(ctx, batch)
		return true, "", "", nil
	}
	return d.refused(err)
}

// batchToCommit is the open batch with its offset updates: from the
// offsets the member last read or wrote to the ones after the batch.
func (d *stored) batchToCommit() *sink.Batch {
	batch := &sink.Batch{Rows: d.rows.rows, DeadLetters: d.rows.dead}
	next := d.batch.cl.UncommittedOffsets()
	d.mu.Lock()
	defer d.mu.Unlock()
	for t, ps := range d.batch.starts {
		for p := range ps {
			tp := record.TopicPartition{Topic: t, Partition: p}
			expected, ok := d.next[tp]
			if !ok {
				expected = -1
			}
			if eo, ok := next[t][p]; ok {
				batch.Offsets = append(batch.Offsets, sink.OffsetUpdate{TopicPartition: tp, Expected: expected, Next: eo.Offset})
			}
		}
	}
	return batch
}

// committedBatch notes the batch's offsets as stored, and copies them to
// the group.
func (d *stored) committedBatch(ctx context.Context, batch *sink.Batch) {
	d.mu.Lock()
	d.failing, d.transient, d.why = time.Time{}, false, ""
	for _, u := range batch.Offsets {
		d.next[u.TopicPartition] = u.Next
	}
	d.mu.Unlock()
	clear(d.batch.starts)
	// For lag tools only: the destination holds the truth, so a slow
	// group coordinator does not hold up the next batch for long.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if cerr := d.batch.cl.CommitUncommittedOffsets(cctx); cerr != nil {
		d.log.Debug("copying the committed offsets to the group failed; the destination has them", "err", cerr.Error())
	}
}

// refused handles a commit the destination refused.
func (d *stored) refused(err error) (bool, Reason, string, error) {
	var fenced *sink.FencedError
	var row *sink.RowError
	var persistent *sink.PersistentError
	switch {
	case errors.As(err, &persistent):
		// The same failure, no row's, again and again: trying more
		// cannot help. End returns it, and the processor stops.
		d.failed(err)
		return false, ReasonEndError, err.Error(), err
	case errors.As(err, &fenced):
		d.m.Fenced.Inc()
		d.log.Warn("fenced: another instance wrote offsets of these partitions since this one read them; resuming from the stored offsets",
			"err", err.Error())
		return false, ReasonFenced, err.Error(), d.rewind(fenced.Partitions)
	case errors.As(err, &row):
		rec := d.rows.rowRecs
		if row.DeadLetter {
			rec = d.rows.deadRecs
		}
		if row.Index >= 0 && row.Index < len(rec) {
			d.out.failed(rec[row.Index], fmt.Errorf("%w: %w", ErrUnwritable, err))
		}
		return false, ReasonProduce, err.Error(), d.rewind(nil)
	}
	d.failed(err)
	// No wait here, inside the next attempt's deadline: the loop's
	// backoff between aborts spaces the attempts (pipeline).
	d.log.Warn("committing the batch to the destination failed; it will be processed again", "err", err.Error())
	return false, ReasonEndError, err.Error(), d.rewind(nil)
}

// rewind sets the consumer back to the batch's first offsets, and the
// fenced partitions to their stored offsets, read again. An error means
// they could not be read: the caller rebuilds the session.
func (d *stored) rewind(fenced []record.TopicPartition) error {
	if len(fenced) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stored, err := d.dest.Offsets(ctx, fenced)
		if err != nil {
			// Without the stored offsets this member cannot tell where to
			// resume: the session is rebuilt, and its new client reads
			// them when it is assigned its partitions.
			clear(d.batch.starts)
			return fmt.Errorf("reading the stored offsets after being fenced: %w", err)
		}
		d.mu.Lock()
		for _, tp := range fenced {
			next, ok := stored[tp]
			if !ok {
				next = -1
			}
			d.next[tp] = next
			if ok {
				ps := d.batch.starts[tp.Topic]
				if ps == nil {
					ps = map[int32]kgo.EpochOffset{}
					d.batch.starts[tp.Topic] = ps
				}
				ps[tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
			}
		}
		d.mu.Unlock()
	}
	d.batch.rewind()
	return nil
}
