package pgsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// The settings a ConfigError names: the suffix of the processor's
// PROCESSOR_POSTGRES_<setting> variable.
const (
	SettingURL             = "URL"
	SettingTable           = "TABLE"
	SettingStatement       = "STATEMENT"
	SettingDeadLetterTable = "DEAD_LETTER_TABLE"
	SettingOffsetsTable    = "OFFSETS_TABLE"
)

// ConfigError is a setting that cannot work: a malformed URL, a table name
// that is not one (or whose schema does not exist, or that exists without
// the sink's columns), a statement with an unknown @parameter or one that
// PostgreSQL refuses. Retrying does not help; the processor exits with
// code 2 and prints Error's one line.
type ConfigError struct {
	// Setting is which one: SettingURL, SettingTable, SettingStatement,
	// SettingDeadLetterTable, SettingOffsetsTable.
	Setting string
	// Value is the value given, with any password replaced by xxxxx.
	Value string
	// Want says what would work, and what PostgreSQL said when it was the
	// one that refused.
	Want string
}

// Error names the variable, its value and what it should be, in the form
// of the processor's other configuration errors.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("PROCESSOR_POSTGRES_%s=%q is invalid: want %s", e.Setting, e.Value, e.Want)
}

// FencedError is returned by Commit when the stored next offset of at least
// one partition was not the batch's OffsetUpdate.Expected: another instance
// (or an earlier attempt of this one whose COMMIT was acknowledged too late,
// see Commit) committed past it. Nothing of the batch was written. The
// caller must not retry the batch: it reloads the offsets (Offsets) and
// resumes each partition from there.
type FencedError struct {
	// Partitions are all the batch's partitions whose update failed,
	// ordered by topic and partition.
	Partitions []TopicPartition
	// Stored are their next offsets as stored right after the rollback
	// (absent: no row); nil if they could not be read.
	Stored map[TopicPartition]int64
}

// Error lists the fenced partitions and what is stored for them.
func (e *FencedError) Error() string {
	var b strings.Builder
	b.WriteString("pgsink: fenced: the stored offsets of ")
	for i, tp := range e.Partitions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tp.String())
		if e.Stored != nil {
			if n, ok := e.Stored[tp]; ok {
				b.WriteString(" (now " + strconv.FormatInt(n, 10) + ")")
			} else {
				b.WriteString(" (now none)")
			}
		}
	}
	b.WriteString(" are not the ones this batch started from: another instance committed them; nothing was written, resume from the stored offsets")
	return b.String()
}

// RowError is one row of a batch that the database refused (a constraint
// violation, a bad cast, a value that is not JSON where the statement
// wants JSON). Nothing of the batch was written; the caller applies its
// error policy to that row's input record and commits the batch again.
type RowError struct {
	// Index is the row's index in Batch.Rows, or in Batch.DeadLetters when
	// DeadLetter is true.
	Index int
	// DeadLetter tells that the row was a dead letter.
	DeadLetter bool
	// Err is why, usually a *pgconn.PgError.
	Err error

	src string // the input record's coordinates, for Error
}

// Error says which row, from which input record, and why.
func (e *RowError) Error() string {
	what := "output row"
	if e.DeadLetter {
		what = "dead letter"
	}
	return fmt.Sprintf("pgsink: %s %d (input %s) refused: %v", what, e.Index, e.src, e.Err)
}

// Unwrap returns Err.
func (e *RowError) Unwrap() error { return e.Err }

// connLostError marks an error after which the connection it happened on
// was closed: the server went away or restarted, the network failed.
type connLostError struct{ err error }

func (e *connLostError) Error() string {
	return "the connection to PostgreSQL was lost: " + e.err.Error()
}
func (e *connLostError) Unwrap() error { return e.err }

// Retriable tells whether committing the same batch again later can
// succeed: true for a lost or refused connection (server down, restarting:
// SQLSTATE class 08, 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
// cannot_connect_now), a serialization failure (40001), a deadlock
// (40P01), too many connections (53300), a lock timeout (55P03), a
// connection the server closed for idling (57P05, 25P03), and a context
// deadline. False for nil, *FencedError, *RowError, *ConfigError, a
// cancelled context, a wrong password and any other error of the database.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	var fe *FencedError
	var re *RowError
	var ce *ConfigError
	if errors.As(err, &fe) || errors.As(err, &re) || errors.As(err, &ce) || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return retriableCode(pe.Code)
	}
	var lost *connLostError
	var connect *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &lost), errors.As(err, &connect), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), pgconn.SafeToRetry(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// retriableCode tells whether an error of SQLSTATE code is transient.
func retriableCode(code string) bool {
	if strings.HasPrefix(code, "08") { // connection exception
		return true
	}
	switch code {
	case "57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now
		"40001", // serialization_failure
		"40P01", // deadlock_detected
		"53300", // too_many_connections
		"55P03", // lock_not_available
		"57P05", // idle_session_timeout: the server closed an idle connection
		"25P03": // idle_in_transaction_session_timeout
		return true
	}
	return false
}

// rowFailure tells whether err is the database refusing one row's data:
// SQLSTATE classes 22 (data exception), 23 (integrity constraint
// violation), 44 (WITH CHECK OPTION violation), 2F, 38, 39 (a routine or
// trigger failed) and P0 (a PL/pgSQL RAISE).
func rowFailure(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) != 5 {
		return false
	}
	switch pe.Code[:2] {
	case "22", "23", "44", "2F", "38", "39", "P0":
		return true
	}
	return false
}

// pgMessage is PostgreSQL's message of err with its detail and hint, or
// err's text.
func pgMessage(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	s := pe.Message
	if pe.Detail != "" {
		s += " (" + pe.Detail + ")"
	}
	if pe.Hint != "" {
		s += "; hint: " + pe.Hint
	}
	return s + " [SQLSTATE " + pe.Code + "]"
}
