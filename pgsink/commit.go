package pgsink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/streamproc/processor/sink"
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
// a row exists already) rolls everything back and returns a *sink.FencedError
// naming every such partition. A row or dead letter the database refuses
// returns a *sink.RowError with its index (a value that is not JSON when the
// statement uses @value is refused before the transaction begins). Any
// other failure rolls back and returns the wrapped error, for which
// Retriable tells whether the same batch may be committed again later.
//
// A connection found dead at BEGIN (the server restarted since it was
// last used) is replaced at once, so the first Commit after a restart
// succeeds. If the connection is lost during COMMIT itself, the outcome is
// unknown: the error is Retriable, and committing the same batch again
// returns a *sink.FencedError if it had in fact committed (Stored then shows
// its Next offsets).
func (s *Sink) Commit(ctx context.Context, b *sink.Batch) error {
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
		return commitError(ctx, start, err)
	}
	stopWatch := s.watchLocks(ctx, c.Conn().PgConn().PID())
	fenced, err := s.write(ctx, tx, b, batch, offsets)
	stopWatch()
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
	var rowErr *sink.RowError
	switch {
	case len(fenced) > 0 && (err == nil || errors.As(err, &rowErr)):
		s.count(RollbackFenced, time.Since(start))
		fe := &sink.FencedError{From: "pgsink", Partitions: fenced}
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
	return commitError(ctx, start, fmt.Errorf("at %s: %w", s.target, err))
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
// MaxIdentical-th identical one in a row: a *sink.RowError for the row it is
// tied to, when no rule knows its SQLSTATE; a *sink.PersistentError otherwise.
// It returns nil for a transient failure (which is neither counted nor
// resets the count) and for one still to be retried.
func (s *Sink) repeated(ctx context.Context, b *sink.Batch, err error) error {
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
	var src *sink.Row
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
		return &sink.RowError{Index: at.row, DeadLetter: at.dead, From: "pgsink", Input: (src).Source(),
			Err: fmt.Errorf("%w (the same failure %d times in a row: taken as this row's)", at.err, n)}
	}
	what := at.what
	if at.row < 0 && kind == setting {
		what = s.diagnose(ctx, pe.Code, what)
	}
	setting, check := s.toCheck(pe.Code, what)
	return &sink.PersistentError{From: "pgsink", Destination: "PostgreSQL", Setting: setting, Check: check, Attempts: n, Detail: pgMessage(err), Err: err}
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

// commitError wraps a failure of Commit begun at start, with the
// context's error when the context ended (so that errors.Is finds it); a
// commit whose deadline passed says that it ran out of time, and after
// how long, whatever it was doing then (connecting, a statement, COMMIT).
func commitError(ctx context.Context, start time.Time, err error) error {
	cerr := ctx.Err()
	if cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(cerr, context.DeadlineExceeded) {
		return fmt.Errorf("pgsink: committing a batch ran out of time after %s (the commit's deadline): %w",
			time.Since(start).Round(time.Millisecond), err)
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
