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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// What one Commit sends: the offset updates, dead letters and rows of a
// batch, and how their results are read.

// queue builds the statements Commit sends in one round trip: the offset
// updates first (so that a fenced batch is known before its rows are
// copied), then the dead letters, then, in statement mode, the rows.
func (s *Sink) queue(b *sink.Batch, offsets []sink.OffsetUpdate) (*pgx.Batch, error) {
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
				return nil, &sink.RowError{Index: i, Err: err, From: "pgsink", Input: (&b.Rows[i]).Source()}
			}
			batch.Queue(s.stmt.sql, args...)
		}
	} else if len(b.Rows) > 0 {
		// Where copyRows goes back to when PostgreSQL refuses a value as
		// jsonb.
		batch.Queue(sqlSavepoint)
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
			if ctx.Err() != nil { // the deadline, not the server: say so (commitError)
				return nil, nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", s.target, err)
			}
			return nil, nil, &runConnectError{msg: s.connectError(err).Error(), err: err}
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
func (s *Sink) write(ctx context.Context, tx pgx.Tx, b *sink.Batch, batch *pgx.Batch, offsets []sink.OffsetUpdate) ([]record.TopicPartition, error) {
	var fenced []record.TopicPartition
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
	return nil, s.copyRows(ctx, tx, b.Rows)
}

// The savepoint COPY starts from, and the statements that go back to it
// and move it on.
const (
	sqlSavepoint     = "SAVEPOINT pgsink_copy"
	sqlRollbackTo    = "ROLLBACK TO SAVEPOINT pgsink_copy"
	sqlMoveSavepoint = "RELEASE SAVEPOINT pgsink_copy; SAVEPOINT pgsink_copy"
)

// copyRows copies rows into the table, from the savepoint that queue
// queued. storableJSON sends a value to the jsonb column when it would
// pass jsonb's rules; PostgreSQL has the final word: when it refuses a
// row's value as jsonb (a character the database's encoding lacks, a
// nesting deeper than its stack allows, anything the check missed), copyRows
// rolls back to the savepoint, copies the rows up to that one again with
// its value in value_bytes, moves the savepoint on and copies the rest.
// Each refusal costs four round trips, and re-copies only the rows since
// the last one. Any other failure tied to a row is a *sink.RowError (its
// content) or a *failedStatement naming the row.
func (s *Sink) copyRows(ctx context.Context, tx pgx.Tx, rows []sink.Row) error {
	var asBytes []bool // per row: its value goes to value_bytes
	start, end := 0, len(rows)
	for {
		src := newRowSource(rows[start:end])
		if asBytes != nil {
			src.asBytes = asBytes[start:end]
		}
		n, err := tx.CopyFrom(ctx, s.records, recordColumns, src)
		if err == nil {
			if n != int64(end-start) {
				return fmt.Errorf("COPY into %s wrote %d rows of %d", s.records.Sanitize(), n, end-start)
			}
			if end == len(rows) {
				return nil
			}
			if _, err := tx.Exec(ctx, sqlMoveSavepoint); err != nil {
				return fmt.Errorf("moving the savepoint of COPY into %s: %w", s.records.Sanitize(), err)
			}
			start, end = end, len(rows)
			continue
		}
		line, column, ok := copyLine(err)
		if !ok || line >= end-start {
			return fmt.Errorf("COPY into %s: %w", s.records.Sanitize(), &failedStatement{what: whatRows, row: -1, err: err})
		}
		i := start + line
		if column == "value" && rows[i].Value != nil && (asBytes == nil || !asBytes[i]) && !Retriable(err) {
			if asBytes == nil {
				asBytes = make([]bool, len(rows))
			}
			asBytes[i] = true
			s.log.Debug("PostgreSQL refused a value as jsonb; it goes to value_bytes", "input", source(&rows[i]), "err", pgMessage(err))
			if _, rerr := tx.Exec(ctx, sqlRollbackTo); rerr != nil {
				return fmt.Errorf("rolling back to the savepoint of COPY into %s: %w (after %w)", s.records.Sanitize(), rerr, err)
			}
			end = i + 1
			continue
		}
		if rowFailure(err) {
			return &sink.RowError{Index: i, Err: err, From: "pgsink", Input: (&rows[i]).Source()}
		}
		return fmt.Errorf("COPY into %s: %w", s.records.Sanitize(), &failedStatement{what: whatRows, row: i, err: err})
	}
}

// results reads the batch's results in the order queue queued them.
func (s *Sink) results(br pgx.BatchResults, b *sink.Batch, offsets []sink.OffsetUpdate) ([]record.TopicPartition, error) {
	var fenced []record.TopicPartition
	for _, u := range offsets {
		ct, err := br.Exec()
		if err != nil {
			return fenced, fmt.Errorf("moving the offset of %s from %d to %d: %w", u.TopicPartition, u.Expected, u.Next, &failedStatement{what: whatOffsets, row: -1, err: err})
		}
		if ct.RowsAffected() != 1 {
			fenced = append(fenced, u.TopicPartition)
		}
	}
	for i := range b.DeadLetters {
		if _, err := br.Exec(); err != nil {
			if rowFailure(err) {
				return fenced, &sink.RowError{Index: i, DeadLetter: true, Err: err, From: "pgsink", Input: (&b.DeadLetters[i].Row).Source()}
			}
			return fenced, fmt.Errorf("writing dead letter %d: %w", i, &failedStatement{what: whatDeadLetters, row: i, dead: true, err: err})
		}
	}
	if s.stmt != nil {
		for i := range b.Rows {
			if _, err := br.Exec(); err != nil {
				if rowFailure(err) {
					return fenced, &sink.RowError{Index: i, Err: err, From: "pgsink", Input: (&b.Rows[i]).Source()}
				}
				return fenced, fmt.Errorf("running the statement for row %d: %w", i, &failedStatement{what: whatRows, row: i, err: err})
			}
		}
	} else if len(b.Rows) > 0 {
		if _, err := br.Exec(); err != nil {
			return fenced, fmt.Errorf("%s: %w", sqlSavepoint, err)
		}
	}
	return fenced, nil
}

// copyLineRE finds the line of a COPY error's context, "COPY t, line 17,
// column value: ...": the 1-based index of the row that failed, and the
// column being read when it did (absent when the row failed after its
// columns were read, in a constraint or a trigger). The context is one
// line per frame, innermost first ("JSON data, line 1: ..." comes before
// it for a JSON value), so it is looked for on every line and the last
// one, the outermost frame, wins.
var copyLineRE = regexp.MustCompile(`(?m)^COPY [^\n]*?, line (\d+)(?:, column ([^\n:,]+))?`)

// copyLine returns the index of the row a COPY error is about, and the
// column it failed on ("" when none).
func copyLine(err error) (int, string, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return 0, "", false
	}
	ms := copyLineRE.FindAllStringSubmatch(pe.Where, -1)
	if ms == nil {
		return 0, "", false
	}
	m := ms[len(ms)-1]
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 {
		return 0, "", false
	}
	return n - 1, m[2], true
}

// sortedOffsets returns the updates ordered by topic and partition,
// checking that they are valid and one per partition.
func sortedOffsets(us []sink.OffsetUpdate) ([]sink.OffsetUpdate, error) {
	out := slices.Clone(us)
	slices.SortFunc(out, func(a, b sink.OffsetUpdate) int {
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
func deadLetterArgs(d *sink.DeadLetter) []any {
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
func source(r *sink.Row) string {
	return r.Topic + "/" + strconv.FormatInt(int64(r.Partition), 10) + "@" + strconv.FormatInt(r.Offset, 10)
}
