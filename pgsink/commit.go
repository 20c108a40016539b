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
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/streamproc/processor/sink"
)

// The batch a Commit writes, as the sink contract has it.
type (
	// Row is one output record with the coordinates of the input
	// record it came from.
	Row = sink.Row
	// DeadLetter is an input record that failed for good, with why.
	DeadLetter = sink.DeadLetter
	// OffsetUpdate moves one partition's stored next offset from
	// Expected (-1: no row stored yet) to Next.
	OffsetUpdate = sink.OffsetUpdate
	// Batch is what one Commit writes: all of it or nothing.
	Batch = sink.Batch
)

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
		err = fmt.Errorf("COMMIT: %w", &failedStatement{what: whatCommit, row: -1, err: err})
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
		fe := &FencedError{From: "pgsink", Partitions: fenced}
		// What is stored now, for the caller's log and for telling an
		// earlier attempt of this batch from another instance's commit.
		fe.Stored, _ = s.Offsets(ctx, fenced)
		return fe
	case errors.As(err, &rowErr):
		s.repeats.reset()
		s.count(RollbackRow, time.Since(start))
		return err
	}
	if lost {
		err = &connLostError{err: err}
	} else if ctx.Err() == nil {
		if final := s.repeated(ctx, b, err); final != nil {
			if errors.As(final, &rowErr) {
				s.count(RollbackRow, time.Since(start))
			} else {
				s.count(RollbackError, time.Since(start))
			}
			return final
		}
	}
	s.count(RollbackError, time.Since(start))
	return commitError(ctx, fmt.Errorf("at %s: %w", s.target, err))
}

// failedStatement is a failure of one of Commit's statements that the
// database did not blame on a row's content: what ran (for the count of
// identical failures and for the setting to check) and on which row, if
// any.
type failedStatement struct {
	what string // whatOffsets, whatDeadLetters, whatRows, whatCommit
	row  int    // index in Batch.Rows or Batch.DeadLetters, -1 for none
	dead bool   // row is a dead letter
	err  error
}

// What failedStatement.what may be.
const (
	whatOffsets     = "offsets"
	whatDeadLetters = "dead letters"
	whatRows        = "rows"
	whatCommit      = "COMMIT"
)

func (e *failedStatement) Error() string { return e.err.Error() }
func (e *failedStatement) Unwrap() error { return e.err }

// repeats counts Commit's identical failures in a row (MaxIdentical).
type repeats struct {
	mu  sync.Mutex
	key string
	n   int
}

// note counts one failure of key and returns how many of the last
// failures in a row were it.
func (r *repeats) note(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.key != key {
		r.key, r.n = key, 0
	}
	r.n++
	return r.n
}

// reset forgets the failures: a Commit went through, or a row was blamed.
func (r *repeats) reset() {
	r.mu.Lock()
	r.key, r.n = "", 0
	r.mu.Unlock()
}

// repeated counts err, a failure of Commit that is neither fenced nor a
// row's content, and returns what it has become when it is the
// MaxIdentical-th identical one in a row: a *RowError for the row it is
// tied to, when no rule knows its SQLSTATE; a *PersistentError otherwise.
// It returns nil for a transient failure (which is neither counted nor
// resets the count) and for one still to be retried.
func (s *Sink) repeated(ctx context.Context, b *Batch, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || Retriable(err) {
		return nil
	}
	kind := classify(pe.Code)
	at := &failedStatement{what: whatCommit, row: -1}
	var fs *failedStatement
	if errors.As(err, &fs) {
		at = fs
	}
	key := pe.Code + "\x00" + pe.Message + "\x00" + at.what
	var src *Row
	if at.row >= 0 {
		if at.dead && at.row < len(b.DeadLetters) {
			src = &b.DeadLetters[at.row].Row
		} else if !at.dead && at.row < len(b.Rows) {
			src = &b.Rows[at.row]
		}
	}
	if src != nil {
		key += "\x00" + source(src) + "#" + strconv.Itoa(src.Seq)
	}
	n := s.repeats.note(key)
	if n < MaxIdentical {
		s.log.Warn("committing to PostgreSQL failed with an error no rule knows to be transient; retrying",
			"attempt", n, "of", MaxIdentical, "err", pgMessage(err))
		return nil
	}
	s.repeats.reset()
	if src != nil && kind == unknown {
		return &RowError{Index: at.row, DeadLetter: at.dead, From: "pgsink", Input: (src).Source(),
			Err: fmt.Errorf("%w (the same failure %d times in a row: taken as this row's)", at.err, n)}
	}
	what := at.what
	if at.row < 0 && kind == setting {
		what = s.diagnose(ctx, pe.Code, what)
	}
	setting, check := s.toCheck(pe.Code, what)
	return &PersistentError{From: "pgsink", Destination: "PostgreSQL", Setting: setting, Check: check, Attempts: n, Detail: pgMessage(err), Err: err}
}

// diagnose finds which of the sink's statements fails with SQLSTATE code
// when PostgreSQL prepares it, and returns its what, or else what: an
// error in preparing a batch arrives with its first statement (the
// offsets), whichever statement it is about.
func (s *Sink) diagnose(ctx context.Context, code, what string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return what
	}
	defer c.Release()
	checks := []struct{ what, sql string }{
		{whatOffsets, s.sqlUpdate}, {whatOffsets, s.sqlInsert}, {whatDeadLetters, s.sqlDead},
	}
	if s.stmt != nil {
		checks = append(checks, struct{ what, sql string }{whatRows, s.stmt.sql})
	} else {
		checks = append(checks, struct{ what, sql string }{whatRows, "SELECT " + strings.Join(recordColumns, ", ") + " FROM " + s.records.Sanitize()})
	}
	for _, ch := range checks {
		_, err := c.Conn().PgConn().Prepare(ctx, "", ch.sql, nil)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == code {
			return ch.what
		}
	}
	return what
}

// toCheck says which setting to check, and what, after a failure with
// SQLSTATE code of the statements of what.
func (s *Sink) toCheck(code, what string) (string, string) {
	switch {
	case code == "42501": // insufficient_privilege
		return SettingURL, "its user (" + s.user + ") lacks a privilege it needs: INSERT on the tables the sink writes (and UPDATE on " + s.offName + "), or what the statement does"
	case strings.HasPrefix(code, "28"):
		return SettingURL, "the user and the password"
	case strings.HasPrefix(code, "3D"), code == "57P04":
		return SettingURL, "the database: it does not exist any more"
	case code == "25006":
		return SettingURL, "the server is read-only (a standby?): point the URL at the primary"
	}
	switch what {
	case whatOffsets:
		return "", "the sink's table " + s.offName + ", its columns, triggers and the user's rights on it (it is created at start when missing)"
	case whatDeadLetters:
		return SettingDeadLetterTable, "the table " + s.dlName + " and its columns (it is created at start when missing)"
	case whatCommit:
		if s.stmt != nil {
			return SettingStatement, "a deferred constraint or trigger of the tables it writes refused the batch at COMMIT"
		}
		return SettingTable, "a deferred constraint or trigger of " + s.recName + " refused the batch at COMMIT"
	}
	if s.stmt != nil {
		return SettingStatement, "the tables, columns and functions it uses, and the user's rights on them"
	}
	return SettingTable, "the table " + s.recName + " and its columns (it is created at start when missing)"
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
				return nil, &RowError{Index: i, Err: err, From: "pgsink", Input: (&b.Rows[i]).Source()}
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
// the last one. Any other failure tied to a row is a *RowError (its
// content) or a *failedStatement naming the row.
func (s *Sink) copyRows(ctx context.Context, tx pgx.Tx, rows []Row) error {
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
			return &RowError{Index: i, Err: err, From: "pgsink", Input: (&rows[i]).Source()}
		}
		return fmt.Errorf("COPY into %s: %w", s.records.Sanitize(), &failedStatement{what: whatRows, row: i, err: err})
	}
}

// results reads the batch's results in the order queue queued them.
func (s *Sink) results(br pgx.BatchResults, b *Batch, offsets []OffsetUpdate) ([]TopicPartition, error) {
	var fenced []TopicPartition
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
				return fenced, &RowError{Index: i, DeadLetter: true, Err: err, From: "pgsink", Input: (&b.DeadLetters[i].Row).Source()}
			}
			return fenced, fmt.Errorf("writing dead letter %d: %w", i, &failedStatement{what: whatDeadLetters, row: i, dead: true, err: err})
		}
	}
	if s.stmt != nil {
		for i := range b.Rows {
			if _, err := br.Exec(); err != nil {
				if rowFailure(err) {
					return fenced, &RowError{Index: i, Err: err, From: "pgsink", Input: (&b.Rows[i]).Source()}
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
