package pgsink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Row is one output record with the coordinates of the input record it
// came from.
type Row struct {
	Key, Value []byte
	Headers    []kgo.RecordHeader
	// Timestamp is the record's; the zero time is stored as NULL.
	Timestamp time.Time
	// Topic, Partition and Offset are the source (input) record's.
	Topic     string
	Partition int32
	Offset    int64
	// Seq is the index of this output among its input's outputs, from 0.
	Seq int
}

// DeadLetter is an input record that failed for good, with why. Its Seq
// is not stored.
type DeadLetter struct {
	Row
	// Error is the failure's message.
	Error string
	// Stage is where it failed, e.g. the transform's name.
	Stage string
	// Attempts is how many times it was tried.
	Attempts int
}

// OffsetUpdate moves one partition's stored next offset from Expected
// (-1: no row stored yet) to Next.
type OffsetUpdate struct {
	TopicPartition
	Expected, Next int64
}

// String returns topic/partition expected->next.
func (u OffsetUpdate) String() string {
	return u.TopicPartition.String() + " " + strconv.FormatInt(u.Expected, 10) + "->" + strconv.FormatInt(u.Next, 10)
}

// Batch is what one Commit writes: all of it or nothing.
type Batch struct {
	Rows        []Row
	DeadLetters []DeadLetter
	// Offsets holds at most one update per partition.
	Offsets []OffsetUpdate
}

// errNotJSON is the RowError.Err of a value that is not JSON when the
// statement uses @value.
var errNotJSON = errors.New("the value is not valid JSON, and the statement takes it as JSON (@value); use @value_text or @value_bytes for other values")

// rollbackTimeout bounds the ROLLBACK of a failed transaction, which runs
// even when the caller's context is done.
const rollbackTimeout = 5 * time.Second

// Commit writes b in one transaction: the offset updates (in topic and
// partition order, so that instances lock them in the same order), the
// dead letters, and the rows (COPY into the table, or the statement once
// per row); then COMMIT. Nothing of b is visible unless all of it is.
//
// An offset update whose Expected is not what is stored (for Expected -1:
// a row exists already) rolls everything back and returns a *FencedError
// naming every such partition. A row or dead letter the database refuses
// returns a *RowError with its index (a value that is not JSON when the
// statement uses @value is refused before the transaction begins). Any
// other failure rolls back and returns the wrapped error, for which
// Retriable tells whether the same batch may be committed again later.
//
// A connection found dead at BEGIN (the server restarted since it was
// last used) is replaced at once, so the first Commit after a restart
// succeeds. If the connection is lost during COMMIT itself, the outcome is
// unknown: the error is Retriable, and committing the same batch again
// returns a *FencedError if it had in fact committed (Stored then shows
// its Next offsets).
func (s *Sink) Commit(ctx context.Context, b *Batch) error {
	if b == nil || len(b.Rows)+len(b.DeadLetters)+len(b.Offsets) == 0 {
		return nil
	}
	offsets, err := sortedOffsets(b.Offsets)
	if err != nil {
		return err
	}
	batch, err := s.queue(b, offsets)
	if err != nil {
		s.count(RollbackRow, 0)
		return err
	}
	start := time.Now()
	c, tx, err := s.begin(ctx)
	if err != nil {
		s.count(RollbackError, 0)
		return commitError(ctx, err)
	}
	fenced, err := s.write(ctx, tx, b, batch, offsets)
	if err == nil && len(fenced) == 0 {
		if err = tx.Commit(ctx); err == nil {
			c.Release()
			if m := s.metrics; m != nil {
				m.RoundTrip.Observe(time.Since(start).Seconds())
				m.Commits.Inc()
				m.RowsWritten.Add(float64(len(b.Rows)))
			}
			return nil
		}
		err = fmt.Errorf("COMMIT: %w", err)
	} else {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		_ = tx.Rollback(rctx) // a dead connection fails it; the server rolls back then
		cancel()
	}
	lost := c.Conn().IsClosed()
	c.Release()
	var rowErr *RowError
	switch {
	case len(fenced) > 0 && (err == nil || errors.As(err, &rowErr)):
		s.count(RollbackFenced, time.Since(start))
		fe := &FencedError{Partitions: fenced}
		// What is stored now, for the caller's log and for telling an
		// earlier attempt of this batch from another instance's commit.
		fe.Stored, _ = s.Offsets(ctx, fenced)
		return fe
	case errors.As(err, &rowErr):
		s.count(RollbackRow, time.Since(start))
		return err
	}
	s.count(RollbackError, time.Since(start))
	if lost {
		err = &connLostError{err: err}
	}
	return commitError(ctx, fmt.Errorf("at %s: %w", s.target, err))
}

// commitError wraps a failure of Commit, with the context's error when
// the context ended (so that errors.Is finds it).
func commitError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("pgsink: committing a batch: %w", err)
}

// count counts a transaction that did not commit; d is how long it was
// open, 0 when it never began.
func (s *Sink) count(reason string, d time.Duration) {
	if m := s.metrics; m != nil {
		if d > 0 {
			m.RoundTrip.Observe(d.Seconds())
		}
		m.Rollbacks.WithLabelValues(reason).Inc()
	}
}

// queue builds the statements Commit sends in one round trip: the offset
// updates first (so that a fenced batch is known before its rows are
// copied), then the dead letters, then, in statement mode, the rows.
func (s *Sink) queue(b *Batch, offsets []OffsetUpdate) (*pgx.Batch, error) {
	batch := &pgx.Batch{}
	for _, u := range offsets {
		if u.Expected == -1 {
			batch.Queue(s.sqlInsert, s.group, u.Topic, u.Partition, u.Next)
		} else {
			batch.Queue(s.sqlUpdate, s.group, u.Topic, u.Partition, u.Next, u.Expected)
		}
	}
	for i := range b.DeadLetters {
		batch.Queue(s.sqlDead, deadLetterArgs(&b.DeadLetters[i])...)
	}
	if s.stmt != nil {
		for i := range b.Rows {
			args, err := s.stmt.args(&b.Rows[i])
			if err != nil {
				return nil, &RowError{Index: i, Err: err, src: source(&b.Rows[i])}
			}
			batch.Queue(s.stmt.sql, args...)
		}
	}
	return batch, nil
}

// begin starts a transaction on a pooled connection. A connection that
// turns out dead at BEGIN is dropped and the next one tried (a fresh one
// at the latest): nothing was written on it.
func (s *Sink) begin(ctx context.Context) (*pgxpool.Conn, pgx.Tx, error) {
	var err error
	for range maxConns + 1 {
		var c *pgxpool.Conn
		if c, err = s.pool.Acquire(ctx); err != nil {
			return nil, nil, s.connectError(err)
		}
		var tx pgx.Tx
		if tx, err = c.Begin(ctx); err == nil {
			return c, tx, nil
		}
		dead := c.Conn().IsClosed()
		c.Release() // a closed connection leaves the pool
		if !dead || ctx.Err() != nil {
			return nil, nil, fmt.Errorf("BEGIN at %s: %w", s.target, err)
		}
		s.log.Info("postgres connection was dead at BEGIN; using another", "target", s.target, "err", err)
	}
	return nil, nil, &connLostError{err: fmt.Errorf("BEGIN at %s: %w", s.target, err)}
}

// write sends the batch, reads its results, and copies the rows in the
// default mode. It returns the partitions whose offset update found
// another offset (and then copies nothing).
func (s *Sink) write(ctx context.Context, tx pgx.Tx, b *Batch, batch *pgx.Batch, offsets []OffsetUpdate) ([]TopicPartition, error) {
	var fenced []TopicPartition
	if batch.Len() > 0 {
		br := tx.SendBatch(ctx, batch)
		var err error
		fenced, err = s.results(br, b, offsets)
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil || len(fenced) > 0 {
			return fenced, err
		}
	}
	if s.records == nil || len(b.Rows) == 0 {
		return nil, nil
	}
	n, err := tx.CopyFrom(ctx, s.records, recordColumns, newRowSource(b.Rows))
	if err != nil {
		if i, ok := copyLine(err); ok && rowFailure(err) && i < len(b.Rows) {
			return nil, &RowError{Index: i, Err: err, src: source(&b.Rows[i])}
		}
		return nil, fmt.Errorf("COPY into %s: %w", s.records.Sanitize(), err)
	}
	if n != int64(len(b.Rows)) {
		return nil, fmt.Errorf("COPY into %s wrote %d rows of %d", s.records.Sanitize(), n, len(b.Rows))
	}
	return nil, nil
}

// results reads the batch's results in the order queue queued them.
func (s *Sink) results(br pgx.BatchResults, b *Batch, offsets []OffsetUpdate) ([]TopicPartition, error) {
	var fenced []TopicPartition
	for _, u := range offsets {
		ct, err := br.Exec()
		if err != nil {
			return fenced, fmt.Errorf("moving the offset of %s from %d to %d: %w", u.TopicPartition, u.Expected, u.Next, err)
		}
		if ct.RowsAffected() != 1 {
			fenced = append(fenced, u.TopicPartition)
		}
	}
	for i := range b.DeadLetters {
		if _, err := br.Exec(); err != nil {
			if rowFailure(err) {
				return fenced, &RowError{Index: i, DeadLetter: true, Err: err, src: source(&b.DeadLetters[i].Row)}
			}
			return fenced, fmt.Errorf("writing dead letter %d: %w", i, err)
		}
	}
	if s.stmt != nil {
		for i := range b.Rows {
			if _, err := br.Exec(); err != nil {
				if rowFailure(err) {
					return fenced, &RowError{Index: i, Err: err, src: source(&b.Rows[i])}
				}
				return fenced, fmt.Errorf("running the statement for row %d: %w", i, err)
			}
		}
	}
	return fenced, nil
}

// copyLineRE finds the line of a COPY error's context, "COPY t, line 17,
// column value: ...": the 1-based index of the row that failed.
var copyLineRE = regexp.MustCompile(`^COPY [^\n]*?, line (\d+)`)

// copyLine returns the index of the row a COPY error is about.
func copyLine(err error) (int, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return 0, false
	}
	m := copyLineRE.FindStringSubmatch(pe.Where)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return 0, false
	}
	return n - 1, true
}

// sortedOffsets returns the updates ordered by topic and partition,
// checking that they are valid and one per partition.
func sortedOffsets(us []OffsetUpdate) ([]OffsetUpdate, error) {
	out := slices.Clone(us)
	slices.SortFunc(out, func(a, b OffsetUpdate) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for i, u := range out {
		if u.Expected < -1 || u.Next < 0 {
			return nil, fmt.Errorf("pgsink: offset update of %s from %d to %d: want Expected >= -1 and Next >= 0", u.TopicPartition, u.Expected, u.Next)
		}
		if i > 0 && out[i-1].TopicPartition == u.TopicPartition {
			return nil, fmt.Errorf("pgsink: two offset updates of %s in one batch", u.TopicPartition)
		}
	}
	return out, nil
}

// deadLetterArgs are the INSERT arguments of one dead letter.
func deadLetterArgs(d *DeadLetter) []any {
	headers := emptyHeaders
	if len(d.Headers) > 0 {
		headers = appendHeaders(nil, d.Headers)
	}
	var ts any
	if !d.Timestamp.IsZero() {
		ts = d.Timestamp
	}
	return []any{d.Topic, d.Partition, d.Offset, d.Key, d.Value, headers, ts, cleanText(d.Error), cleanText(d.Stage), int32(d.Attempts)}
}

// cleanText makes s storable as text: valid UTF-8 without NUL.
func cleanText(s string) string {
	if textualKey(s) {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// source is the input coordinates of r, topic/partition@offset.
func source(r *Row) string {
	return r.Topic + "/" + strconv.FormatInt(int64(r.Partition), 10) + "@" + strconv.FormatInt(r.Offset, 10)
}
