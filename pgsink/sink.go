package pgsink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
)

// The default table names.
const (
	DefaultTable           = "processor_records"
	DefaultDeadLetterTable = "processor_dead_letters"
	DefaultOffsetsTable    = "processor_offsets"
)

// Pool settings. The sink runs one transaction at a time per caller; a
// second connection lets Offsets (or a second caller) run beside a Commit.
const (
	maxConns = 2
	// connectTimeout bounds one connection attempt when the URL sets no
	// connect_timeout.
	connectTimeout = 10 * time.Second
	// healthCheckPeriod is how often idle connections are checked, so
	// that a connection the server dropped is replaced before a Commit
	// needs it; Commit replaces one it finds dead at BEGIN too.
	healthCheckPeriod = 10 * time.Second
)

// Options configure a Sink.
type Options struct {
	// URL is a PostgreSQL connection URL, postgres://user:password@host:port/db?sslmode=...;
	// any libpq URL parameter works (sslmode, sslrootcert, connect_timeout,
	// application_name, search_path, ...). Required. It never appears in
	// logs or errors with its password.
	URL string
	// Password, when set, replaces the URL's password (read from a
	// password file by the caller).
	Password string
	// PasswordFile, when set, is read again before every new connection,
	// its password replacing Password: a password rotated in the file
	// is used from the next connection on (see ReadPasswordFile).
	PasswordFile string
	// Table is the table outputs go to in the default mode, created if
	// missing; default DefaultTable. It may be schema-qualified
	// (billing.records); the schema must exist. Not used with Statement.
	Table string
	// Statement, when set, is the SQL run once per output row instead of
	// writing to Table, with named parameters: @key (bytea), @key_text
	// (the key as text), @value (text holding JSON, to be cast:
	// @value::jsonb; a value that is not JSON fails its row), @value_text,
	// @value_bytes (bytea), @topic, @partition (int), @offset (bigint),
	// @seq (int), @timestamp (timestamptz) of the input record, and
	// @header_<name> (the text of the first header <name>, NULL when
	// absent; <name> of [A-Za-z0-9_]). A nil key or value is NULL. Each
	// parameter has that type wherever it stands; other types take a cast
	// (@key_text::int). It must be one statement (INSERT, UPDATE, DELETE,
	// MERGE, WITH, SELECT, VALUES or CALL) that PostgreSQL accepts at
	// Open, e.g. an upsert: INSERT INTO invoices (order_id, doc) VALUES
	// ((@value::jsonb->>'order_id')::int, @value::jsonb) ON CONFLICT
	// (order_id) DO UPDATE SET doc = EXCLUDED.doc.
	Statement string
	// DeadLetterTable is the table of dead letters, created if missing;
	// default DefaultDeadLetterTable.
	DeadLetterTable string
	// OffsetsTable is the table of the groups' next offsets, created if
	// missing; default DefaultOffsetsTable.
	OffsetsTable string
	// Group is the consumer group; the offsets table's rows are per group.
	// Required.
	Group string
	// Logger gets the sink's few messages; nil discards them.
	Logger *slog.Logger
	// Metrics, when not nil, are updated by Commit.
	Metrics *Metrics
}

// Sink writes batches to PostgreSQL. Its methods are safe for concurrent
// use; a Commit holds one of the pool's two connections for its
// transaction.
type Sink struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	metrics *Metrics
	group   string
	target  string // user@host:port/db, for errors and logs
	user    string // the URL's user, for errors

	// The tables' names as given, for errors.
	recName, dlName, offName string
	repeats                  repeats // Commit's identical failures in a row

	records    pgx.Identifier // default mode
	stmt       *statement     // statement mode
	sqlDead    string         // INSERT of a dead letter
	sqlInsert  string         // first offset of a partition
	sqlUpdate  string         // conditional offset update
	sqlOffsets string         // stored offsets of the group
	sqlSome    string         // stored offsets of some partitions
	sqlSet     string         // an offset set whatever it was (SetOffsets)
}

// Open checks the options, connects, creates the tables that are missing
// and, in statement mode, has PostgreSQL check the statement. A setting
// that cannot work is a *settings.Error (a server certificate that does
// not verify included: the URL's sslmode and sslrootcert); a server that
// refuses the user, the password or the database, a *sink.RefusedError;
// one that cannot be reached, a wrapped error naming where it tried.
func Open(ctx context.Context, o Options) (*Sink, error) {
	if o.Group == "" {
		return nil, errors.New("pgsink: Options.Group is empty")
	}
	cfg, err := poolConfig(o)
	if err != nil {
		return nil, err
	}
	s := &Sink{
		log:     o.Logger,
		metrics: o.Metrics,
		group:   o.Group,
		target:  target(cfg.ConnConfig),
		user:    cfg.ConnConfig.User,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var tables []table
	name := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	offName := name(o.OffsetsTable, DefaultOffsetsTable)
	offID, err := parseTable(SettingOffsetsTable, offName)
	if err != nil {
		return nil, err
	}
	tables = append(tables, offsetsTable(offName, offID))
	dlName := name(o.DeadLetterTable, DefaultDeadLetterTable)
	dlID, err := parseTable(SettingDeadLetterTable, dlName)
	if err != nil {
		return nil, err
	}
	tables = append(tables, deadLetterTable(dlName, dlID))
	s.offName, s.dlName = offName, dlName
	mode, recName := "table", ""
	if strings.TrimSpace(o.Statement) != "" {
		mode = "statement"
		if s.stmt, err = parseStatement(o.Statement); err != nil {
			return nil, err
		}
	} else {
		recName = name(o.Table, DefaultTable)
		if s.records, err = parseTable(SettingTable, recName); err != nil {
			return nil, err
		}
		tables = append(tables, recordsTable(recName, s.records))
		s.recName = recName
	}
	off := offID.Sanitize()
	s.sqlInsert = `INSERT INTO ` + off + ` ("group", topic, "partition", next_offset) VALUES ($1, $2, $3, $4) ON CONFLICT ("group", topic, "partition") DO NOTHING`
	s.sqlUpdate = `UPDATE ` + off + ` SET next_offset = $4, updated_at = now() WHERE "group" = $1 AND topic = $2 AND "partition" = $3 AND next_offset = $5`
	s.sqlSet = `INSERT INTO ` + off + ` ("group", topic, "partition", next_offset) VALUES ($1, $2, $3, $4) ON CONFLICT ("group", topic, "partition") DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()`
	s.sqlOffsets = `SELECT topic, "partition", next_offset FROM ` + off + ` WHERE "group" = $1`
	s.sqlSome = s.sqlOffsets + ` AND (topic, "partition") IN (SELECT * FROM unnest($2::text[], $3::int[]))`
	s.sqlDead = `INSERT INTO ` + dlID.Sanitize() + ` (src_topic, src_partition, src_offset, key, value, headers, ts, error, stage, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgsink: PostgreSQL at %s: %w", s.target, err)
	}
	if err := s.setUp(ctx, tables); err != nil {
		s.pool.Close()
		return nil, err
	}
	attrs := []any{"target", s.target, "mode", mode, "offsets_table", offName, "dead_letter_table", dlName, "group", o.Group}
	if s.records != nil {
		attrs = append(attrs, "table", recName)
	}
	s.log.Info("postgres sink ready", attrs...)
	return s, nil
}

// setUp connects, creates the tables and checks the statement.
func (s *Sink) setUp(ctx context.Context, tables []table) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgsink: %w", s.connectError(err))
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgsink: PostgreSQL at %s: %w", s.target, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := ensureTables(ctx, tx, tables); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgsink: creating the tables at %s: %w", s.target, err)
	}
	if s.stmt == nil {
		return nil
	}
	// Parse, analyse and plan the statement without running it: unknown
	// tables, columns, functions and type mismatches show now.
	if _, err := c.Conn().PgConn().Prepare(ctx, "", s.stmt.sql, nil); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return settingError(SettingStatement, s.stmt.src, "a statement PostgreSQL accepts; it says: "+pgMessage(err))
		}
		return fmt.Errorf("pgsink: checking the statement at %s: %w", s.target, err)
	}
	return nil
}

// connectError explains a failure to connect: where, as whom, and what
// to check. A server certificate that does not verify is a
// *settings.Error of the URL (its sslmode and sslrootcert); a server that
// refuses the user, the password or the database, a *sink.RefusedError;
// either way no retry fixes it.
func (s *Sink) connectError(err error) error {
	check := "check that the server runs and accepts TCP connections there (host and port of the URL), and the network in between"
	if why := certificateFailure(err); why != "" {
		return &settings.Error{Field: SettingURL, Secret: true,
			Want: settings.Say("a URL under which the server at " + s.target + " verifies: " + why +
				"; check the URL's sslmode and sslrootcert (the file of the CA that signed the server's certificate), and that its host is a name the certificate holds (" + err.Error() + ")")}
	}
	refused := func(check string) error {
		return &sink.RefusedError{Err: fmt.Errorf("cannot connect to PostgreSQL at %s: %w; %s", s.target, err, check)}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "28"): // invalid_password, invalid_authorization_specification
			return refused("check the user and the password (the URL's, or the password file's), and pg_hba.conf on the server")
		case pe.Code == "3D000": // invalid_catalog_name
			return refused("check the database name in the URL: it does not exist")
		case strings.HasPrefix(pe.Code, "57P") || pe.Code == "53300":
			check = "the server is starting, stopping or full; try again"
		}
	}
	return fmt.Errorf("cannot connect to PostgreSQL at %s: %w; %s", s.target, err, check)
}

// certificateFailure says why err is a server certificate that did not
// verify (an unknown authority, a host name the certificate does not
// hold, an expired or otherwise invalid certificate), or "" when it is
// not: no retry fixes one, only the URL's sslmode and sslrootcert (or the
// server's certificate) can.
func certificateFailure(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return "the server's certificate is signed by an authority the sink does not trust"
	case errors.As(err, &host):
		return "the server's certificate is not valid for host " + host.Host
	case errors.As(err, &invalid):
		return "the server's certificate is invalid (" + invalid.Error() + ")"
	case errors.As(err, &verify):
		return "the server's certificate does not verify"
	}
	return ""
}

// Close closes the connections; it waits for the ones in use to be
// returned.
func (s *Sink) Close() { s.pool.Close() }

// Offsets returns the stored next offsets of the sink's group for parts
// (for every partition of the group when parts is empty); partitions
// without a row are absent from the map.
func (s *Sink) Offsets(ctx context.Context, parts []record.TopicPartition) (map[record.TopicPartition]int64, error) {
	var out map[record.TopicPartition]int64
	err := s.retryRead(ctx, func() error {
		var rows pgx.Rows
		var err error
		if len(parts) == 0 {
			rows, err = s.pool.Query(ctx, s.sqlOffsets, s.group)
		} else {
			topics := make([]string, len(parts))
			nums := make([]int32, len(parts))
			for i, tp := range parts {
				topics[i], nums[i] = tp.Topic, tp.Partition
			}
			rows, err = s.pool.Query(ctx, s.sqlSome, s.group, topics, nums)
		}
		if err != nil {
			return err
		}
		out = make(map[record.TopicPartition]int64, len(parts))
		var tp record.TopicPartition
		var next int64
		_, err = pgx.ForEachRow(rows, []any{&tp.Topic, &tp.Partition, &next}, func() error {
			out[tp] = next
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgsink: reading the offsets of group %q at %s: %w", s.group, s.target, err)
	}
	return out, nil
}

// retryRead runs the read-only f, again on a fresh connection when the
// one it ran on turned out to be dead (a server restart leaves the pool's
// idle connections so); reads are safe to repeat.
func (s *Sink) retryRead(ctx context.Context, f func() error) error {
	var err error
	for range maxConns + 1 {
		if err = f(); err == nil || !lostConnection(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// lostConnection tells whether err says the connection failed under a
// statement (rather than the server refusing it, or connecting failing).
func lostConnection(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P05"
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return false
	}
	return Retriable(err)
}
