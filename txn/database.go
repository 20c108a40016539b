package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/transform"
)

// Into PostgreSQL (Options.Database): the same session and loop, with the
// database in place of the Kafka transaction. Produce keeps a batch's
// outputs as rows; End writes them, the dead letters and the batch's next
// offsets in one database transaction (pgsink.Sink.Commit), and only then
// copies the offsets to the group, for lag tools. The offsets stored in
// the database are the truth: a member that is assigned a partition
// resumes from its stored offset (AdjustFetchOffsetsFn), and each commit
// moves a partition's stored offset only from the one this member resumed
// from or last wrote. An instance that lost a partition to another, which
// has written since, is fenced: its whole database transaction rolls back,
// and it resumes every partition from what is stored. Rebalances wait
// until a batch has ended (BlockRebalanceOnPoll), as at least once.

// ErrUnwritable marks a Failure whose output can never be written (the
// database refused its row): retrying the same record cannot help.
var ErrUnwritable = errors.New("the output cannot be written")

// database is the session's state for Options.Database.
type database struct {
	sink *pgsink.Sink
	// rows and dead are the open batch's, with the record each came from
	// (for Failures).
	rows     []pgsink.Row
	rowRecs  []*kgo.Record
	dead     []pgsink.DeadLetter
	deadRecs []*kgo.Record
	last     transform.Source // the source of the last row, to number its outputs
	backoff  time.Duration    // before the next commit, after one that failed

	mu sync.Mutex
	// stored is, per partition this member holds, the next offset stored
	// in the database as this member last read or wrote it (-1: none):
	// each commit expects it. Written by the group's callbacks too.
	stored map[pgsink.TopicPartition]int64
	// failing is since when commits have failed without one going
	// through (zero: none failing); transient tells whether the last
	// failure was one that retrying fixes (pgsink.Retriable), why is its
	// message. Read by CommitFailing, from any goroutine.
	failing   time.Time
	transient bool
	why       string
}

// CommitFailing reports, in database mode, since when committing to
// PostgreSQL has failed without a commit going through (the zero time when
// the last one went through, when none failed yet, and outside database
// mode), whether the last failure was transient (a lost connection, a
// deadlock, a server starting: pgsink.Retriable) rather than one retrying
// is not expected to fix, and its message. A batch fenced or rolled back
// for a row's sake is no failure here. Safe from any goroutine; the
// pipeline's health check reads it.
func (s *Session) CommitFailing() (since time.Time, transient bool, why string) {
	if s.db == nil {
		return time.Time{}, false, ""
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	return s.db.failing, s.db.transient, s.db.why
}

// failed notes a failed commit for CommitFailing.
func (d *database) failed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failing.IsZero() {
		d.failing = time.Now()
	}
	d.transient, d.why = pgsink.Retriable(err), err.Error()
}

// adjustOffsets is the group client's AdjustFetchOffsetsFn in database
// mode: the assigned partitions resume from their stored offsets, which
// win over the group's; a partition with none starts where the group says.
// It retries reading until it succeeds or the assignment is revoked.
func (s *Session) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var parts []pgsink.TopicPartition
	for t, ps := range offsets {
		for p := range ps {
			parts = append(parts, pgsink.TopicPartition{Topic: t, Partition: p})
		}
	}
	backoff := 250 * time.Millisecond
	for {
		stored, err := s.db.sink.Offsets(ctx, parts)
		if err == nil {
			s.db.mu.Lock()
			for _, tp := range parts {
				next, ok := stored[tp]
				if !ok {
					s.db.stored[tp] = -1
					continue
				}
				s.db.stored[tp] = next
				offsets[tp.Topic][tp.Partition] = kgo.NewOffset().At(next).WithEpoch(-1)
			}
			s.db.mu.Unlock()
			return offsets, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		s.log.Warn("cannot read the stored offsets of the assigned partitions; retrying", "retry_in", backoff.String(), "err", err.Error())
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// forget drops what the member stored for partitions it no longer holds.
func (d *database) forget(revoked map[string][]int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if revoked == nil {
		clear(d.stored)
		return
	}
	for t, ps := range revoked {
		for _, p := range ps {
			delete(d.stored, pgsink.TopicPartition{Topic: t, Partition: p})
		}
	}
}

// produceRow keeps r, an output of src, as a row of the open batch.
func (d *database) produceRow(r *kgo.Record, src transform.Source) {
	row := pgsink.Row{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
		Topic: src.Topic, Partition: src.Partition, Offset: src.Offset}
	if len(d.rows) > 0 && d.last == src {
		row.Seq = d.rows[len(d.rows)-1].Seq + 1
	}
	d.last = src
	d.rows = append(d.rows, row)
	d.rowRecs = append(d.rowRecs, r)
}

// produceDeadLetter keeps r, the dead letter of src, with why it failed.
func (d *database) produceDeadLetter(r *kgo.Record, src transform.Source, why DeadLetter) {
	d.dead = append(d.dead, pgsink.DeadLetter{
		Row: pgsink.Row{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: src.Topic, Partition: src.Partition, Offset: src.Offset},
		Error: why.Err.Error(), Stage: why.Stage, Attempts: why.Attempts})
	d.deadRecs = append(d.deadRecs, r)
}

// reset drops the open batch.
func (d *database) reset() {
	clear(d.rows)
	clear(d.rowRecs)
	clear(d.dead)
	clear(d.deadRecs)
	d.rows, d.rowRecs, d.dead, d.deadRecs = d.rows[:0], d.rowRecs[:0], d.dead[:0], d.deadRecs[:0]
	d.last = transform.Source{}
}

// endDatabase ends a batch: unless abort is set, it commits the rows, dead
// letters and offsets in one database transaction and then copies the
// offsets to the group; otherwise, or when the commit fails, it rewinds to
// the batch's first offsets (to the stored ones for fenced partitions). It
// returns whether the batch committed, the abort reason when the session
// decides it, and why; a *pgsink.PersistentError when committing cannot
// succeed (End returns it: the processor stops), any other error when the
// session must be rebuilt.
func (s *Session) endDatabase(ctx context.Context, abort Reason) (bool, Reason, string, error) {
	d := s.db
	defer func() {
		d.reset()
		s.plain.AllowRebalance()
	}()
	if abort != "" {
		return false, abort, "", s.rewind(nil)
	}
	if d.backoff > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d.backoff):
		}
	}
	batch := pgsink.Batch{Rows: d.rows, DeadLetters: d.dead}
	next := s.plain.UncommittedOffsets()
	d.mu.Lock()
	for t, ps := range s.batchStart {
		for p := range ps {
			tp := pgsink.TopicPartition{Topic: t, Partition: p}
			expected, ok := d.stored[tp]
			if !ok {
				expected = -1
			}
			if eo, ok := next[t][p]; ok {
				batch.Offsets = append(batch.Offsets, pgsink.OffsetUpdate{TopicPartition: tp, Expected: expected, Next: eo.Offset})
			}
		}
	}
	d.mu.Unlock()
	err := d.sink.Commit(ctx, &batch)
	if err == nil {
		d.backoff = 0
		d.mu.Lock()
		d.failing, d.transient, d.why = time.Time{}, false, ""
		for _, u := range batch.Offsets {
			d.stored[u.TopicPartition] = u.Next
		}
		d.mu.Unlock()
		clear(s.batchStart)
		// For lag tools only: the database holds the truth, so a slow
		// group coordinator does not hold up the next batch for long.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if cerr := s.plain.CommitUncommittedOffsets(cctx); cerr != nil {
			s.log.Debug("copying the committed offsets to the group failed; the database has them", "err", cerr.Error())
		}
		return true, "", "", nil
	}
	var fenced *pgsink.FencedError
	var row *pgsink.RowError
	var persistent *pgsink.PersistentError
	switch {
	case errors.As(err, &persistent):
		// The same failure, no row's, again and again: trying more
		// cannot help. End returns it, and the processor stops.
		d.failed(err)
		return false, ReasonEndError, err.Error(), err
	case errors.As(err, &fenced):
		s.m.Fenced.Inc()
		s.log.Warn("fenced: another instance wrote offsets of these partitions since this one read them; resuming from the stored offsets",
			"err", err.Error())
		return false, ReasonFenced, err.Error(), s.rewind(fenced.Partitions)
	case errors.As(err, &row):
		rec := d.rowRecs
		if row.DeadLetter {
			rec = d.deadRecs
		}
		if row.Index >= 0 && row.Index < len(rec) {
			s.onProduced(rec[row.Index], fmt.Errorf("%w: %w", ErrUnwritable, err))
		}
		return false, ReasonProduce, err.Error(), s.rewind(nil)
	}
	d.failed(err)
	d.backoff = min(max(2*d.backoff, 250*time.Millisecond), 5*time.Second)
	s.log.Warn("committing the batch to PostgreSQL failed; it will be processed again", "retry_in", d.backoff.String(), "err", err.Error())
	return false, ReasonEndError, err.Error(), s.rewind(nil)
}

// rewind sets the consumer back to the batch's first offsets, and the
// fenced partitions to their stored offsets, read again. An error means
// they could not be read: the caller rebuilds the session.
func (s *Session) rewind(fenced []pgsink.TopicPartition) error {
	if len(fenced) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stored, err := s.db.sink.Offsets(ctx, fenced)
		if err != nil {
			// Without the stored offsets this member cannot tell where to
			// resume: the session is rebuilt, and its new client reads
			// them when it is assigned its partitions.
			clear(s.batchStart)
			return fmt.Errorf("reading the stored offsets after being fenced: %w", err)
		}
		s.db.mu.Lock()
		for _, tp := range fenced {
			next, ok := stored[tp]
			if !ok {
				next = -1
			}
			s.db.stored[tp] = next
			if ok {
				ps := s.batchStart[tp.Topic]
				if ps == nil {
					ps = map[int32]kgo.EpochOffset{}
					s.batchStart[tp.Topic] = ps
				}
				ps[tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
			}
		}
		s.db.mu.Unlock()
	}
	s.plain.SetOffsets(s.batchStart)
	clear(s.batchStart)
	return nil
}
