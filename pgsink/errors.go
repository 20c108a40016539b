package pgsink

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
)

// The settings a *settings.Error or a *sink.PersistentError names, as Settings
// declares them; the processor reads each from a variable of its own.
const (
	SettingURL             = "URL"
	SettingTable           = "TABLE"
	SettingStatement       = "STATEMENT"
	SettingDeadLetterTable = "DEAD_LETTER_TABLE"
	SettingOffsetsTable    = "OFFSETS_TABLE"
	SettingPasswordFile    = "PASSWORD_FILE"
)

// settingError is a setting that cannot work: a malformed URL, a table
// name that is not one (or whose schema does not exist, or that exists
// without the sink's columns), a statement with an unknown @parameter or
// one that PostgreSQL refuses. Retrying does not help; the processor
// exits with code 2 and prints its one line, naming the setting's
// variable. value is the value given, with any password replaced by
// xxxxx; want says what would work, and what PostgreSQL said when it was
// the one that refused.
func settingError(setting, value, want string) *settings.Error {
	return &settings.Error{Field: setting, Value: value, Want: settings.Say(want)}
}

// connLostError marks an error after which the connection it happened on
// was closed: the server went away or restarted, the network failed.
type connLostError struct{ err error }

func (e *connLostError) Error() string {
	return "the connection to PostgreSQL was lost: " + e.err.Error()
}
func (e *connLostError) Unwrap() error { return e.err }

// runConnectError is a failure to connect during a run: connectError's
// explanation, but the connection's error underneath rather than the
// typed refusal that ends a start. A server whose certificate or
// password changed under a running sink may be mended; Retriable judges
// the connection's error as such (a refused connection or certificate
// yes, a wrong password no).
type runConnectError struct {
	msg string
	err error
}

func (e *runConnectError) Error() string { return e.msg }
func (e *runConnectError) Unwrap() error { return e.err }

// Retriable is the package's Retriable, for the sink contract.
func (s *Sink) Retriable(err error) bool { return Retriable(err) }

// Retriable tells whether committing the same batch again later can
// succeed: true for a lost or refused connection (server down, restarting:
// SQLSTATE class 08, 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
// cannot_connect_now), a serialization failure (40001), a deadlock
// (40P01), insufficient resources (class 53: too many connections, disk
// full, out of memory), a lock not available (55P03), a query canceled or
// a statement timeout (57014), a connection the server closed for idling
// (57P05, 25P03), and a context deadline. False for nil, the contract's
// typed errors (*sink.FencedError, *sink.RowError, *sink.PersistentError,
// *sink.RefusedError, *settings.Error), a cancelled context, a wrong
// password and any other error of the database.
func Retriable(err error) bool {
	if err == nil {
		return false
	}
	var fe *sink.FencedError
	var re *sink.RowError
	var ce *settings.Error
	var pe *sink.PersistentError
	var refused *sink.RefusedError
	if errors.As(err, &fe) || errors.As(err, &re) || errors.As(err, &ce) || errors.As(err, &pe) || errors.As(err, &refused) ||
		errors.Is(err, context.Canceled) {
		return false
	}
	var pge *pgconn.PgError
	if errors.As(err, &pge) {
		return classify(pge.Code) == transient
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

// failureKind is what an SQLSTATE says about trying again.
type failureKind uint8

const (
	// unknown: no rule says; the same failure repeated MaxIdentical
	// times is taken as the row's (when it is tied to one) or as fatal.
	unknown failureKind = iota
	// transient: the same batch may succeed later (connection,
	// serialization, deadlock, shutdown, resources, locks, timeouts).
	transient
	// rowContent: the row's content is at fault (a bad value, a
	// constraint, a trigger or routine that refused it, a limit it
	// exceeds): its record goes to the error policy at once.
	rowContent
	// setting: something no row causes and no retry fixes (a table or
	// column that is gone, a privilege, a feature, a read-only server):
	// fatal after MaxIdentical identical failures.
	setting
)

// classify sorts an SQLSTATE by whether a retry can succeed and whose
// fault it is.
func classify(code string) failureKind {
	if len(code) != 5 {
		return unknown
	}
	switch code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available
		"57014", // query_canceled, statement_timeout
		"57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now
		"57P05", // idle_session_timeout: the server closed an idle connection
		"25P03", // idle_in_transaction_session_timeout
		"72000": // snapshot_too_old
		return transient
	case "25006", // read_only_sql_transaction: the URL reaches a standby
		"57P04": // database_dropped
		return setting
	}
	switch code[:2] {
	case "08", // connection exception
		"53": // insufficient resources: too many connections, disk full, out of memory
		return transient
	case "21", // cardinality violation (ON CONFLICT DO UPDATE touching a row twice)
		"22", // data exception
		"23", // integrity constraint violation
		"27", // triggered data change violation
		"2F", // SQL routine exception
		"38", // external routine exception
		"39", // external routine invocation exception
		"44", // WITH CHECK OPTION violation
		"54", // program limit exceeded (an index entry too large, too complex)
		"09", // triggered action exception
		"P0": // PL/pgSQL: RAISE, assertions
		return rowContent
	case "42", // syntax error or access rule violation: undefined table or column, privilege
		"0A", // feature not supported
		"28", // invalid authorization specification
		"3D", // invalid catalog name
		"3F", // invalid schema name
		"0P": // invalid role specification
		return setting
	}
	return unknown
}

// rowFailure tells whether err is the database refusing one row's
// content (classify's rowContent).
func rowFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && classify(pe.Code) == rowContent
}

// MaxIdentical is how many times in a row Commit may fail with the same
// error (SQLSTATE and message, on the same row or the same statement)
// that no rule calls transient before it stops trying: the last time, a
// failure tied to a row becomes a *sink.RowError for that row, and one tied to
// none a *sink.PersistentError.
const MaxIdentical = 3

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
