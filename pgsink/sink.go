package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/streamproc/processor/record"
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

// TopicPartition is one input partition.
type TopicPartition = record.TopicPartition

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
}

// Open checks the options, connects, creates the tables that are missing
// and, in statement mode, has PostgreSQL check the statement. A setting
// that cannot work is a *ConfigError. A server that cannot be reached, or
// refuses the user or password, is a wrapped error naming where it tried.
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
			return &ConfigError{Setting: SettingStatement, Value: s.stmt.src, Want: "a statement PostgreSQL accepts; it says: " + pgMessage(err)}
		}
		return fmt.Errorf("pgsink: checking the statement at %s: %w", s.target, err)
	}
	return nil
}

// connectError explains a failure to connect: where, as whom, and what
// to check.
func (s *Sink) connectError(err error) error {
	check := "check that the server runs and accepts TCP connections there (host and port of the URL), and the network in between"
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "28"): // invalid_password, invalid_authorization_specification
			return &RefusedError{Target: s.target, Err: err,
				Check: "check the user and the password (the URL's, or the password file's), and pg_hba.conf on the server"}
		case pe.Code == "3D000": // invalid_catalog_name
			return &RefusedError{Target: s.target, Err: err, Check: "check the database name in the URL: it does not exist"}
		case strings.HasPrefix(pe.Code, "57P") || pe.Code == "53300":
			check = "the server is starting, stopping or full; try again"
		}
	}
	return fmt.Errorf("cannot connect to PostgreSQL at %s: %w; %s", s.target, err, check)
}

// RefusedError is a server that refused the connection for a reason no
// retry fixes: the user, the password, or the database does not exist.
type RefusedError struct {
	Target string // user@host:port/database, without the password
	Err    error
	Check  string // what to check
}

// Error says where, what the server said, and what to check.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("cannot connect to PostgreSQL at %s: %v; %s", e.Target, e.Err, e.Check)
}

// Unwrap returns the server's error.
func (e *RefusedError) Unwrap() error { return e.Err }

// Close closes the connections; it waits for the ones in use to be
// returned.
func (s *Sink) Close() { s.pool.Close() }

// Offsets returns the stored next offsets of the sink's group for parts
// (for every partition of the group when parts is empty); partitions
// without a row are absent from the map.
func (s *Sink) Offsets(ctx context.Context, parts []TopicPartition) (map[TopicPartition]int64, error) {
	var out map[TopicPartition]int64
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
		out = make(map[TopicPartition]int64, len(parts))
		var tp TopicPartition
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

// poolConfig parses the URL, applies the password and the sink's pool
// settings.
func poolConfig(o Options) (*pgxpool.Config, error) {
	badURL := func(want string) error {
		return &ConfigError{Setting: SettingURL, Value: redactURL(o.URL), Want: want}
	}
	const urlWant = "a URL such as postgres://user:password@host:5432/database?sslmode=verify-full"
	if !strings.HasPrefix(o.URL, "postgres://") && !strings.HasPrefix(o.URL, "postgresql://") {
		return nil, badURL(urlWant)
	}
	if _, ok := splitURL(o.URL); !ok {
		return nil, badURL(urlWant + ", with the reserved characters of the password %-encoded (%2F for /, %3F for ?, %23 for #, %40 for @, ...): an @ after the first /, ? or # leaves it unclear where the password ends; %-encode an @ in the database name or a parameter as %40")
	}
	if _, err := url.Parse(o.URL); err != nil {
		return nil, badURL(urlWant + " (special characters in the password %-encoded)")
	}
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		var pce *pgconn.ParseConfigError
		why := ""
		if errors.As(err, &pce) && pce.Unwrap() != nil {
			why = ": " + scrub(pce.Unwrap().Error(), o.URL)
		}
		return nil, badURL(urlWant + why)
	}
	if o.Password != "" {
		cfg.ConnConfig.Password = o.Password
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	// Everything the sink sends is UTF-8 (the values, the headers as
	// JSON, the dead letters' errors): the server converts it to the
	// database's encoding, and refuses what that lacks.
	cfg.ConnConfig.RuntimeParams["client_encoding"] = "UTF8"
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "processor"
	}
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	cfg.HealthCheckPeriod = healthCheckPeriod
	return cfg, nil
}

// target is user@host:port/database of a connection configuration.
func target(c *pgx.ConnConfig) string {
	host := c.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(c.Port)))
	} else {
		host += ":" + strconv.Itoa(int(c.Port))
	}
	return c.User + "@" + host + "/" + c.Database
}

// urlParts are the pieces of a connection URL that splitURL finds.
type urlParts struct {
	scheme    string
	userinfo  string // before the authority's @, "" when none
	hasUser   bool
	authority string // the hosts and ports, after the userinfo
	rest      string // the path, query and fragment
}

// splitURL splits a connection URL scheme://[userinfo@]hosts[/path][?query]
// without trusting it to be well formed. libpq (and pgx, which parses as
// libpq does) ends the userinfo at the first @ before any /, Go's net/url
// at the last @ before the first /, ? or #: ok is false unless the two
// agree and no @ comes later, since a password with an unescaped @, /, ?
// or # would otherwise show as a host, a port, a database name or a
// parameter.
func splitURL(s string) (urlParts, bool) {
	var p urlParts
	scheme, rest, found := strings.Cut(s, "://")
	if !found {
		return p, false
	}
	p.scheme = scheme
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.IndexByte(rest, '@')
	if at > end || strings.Count(rest, "@") > 1 {
		return p, false
	}
	p.authority, p.rest = rest[:end], rest[end:]
	if at >= 0 {
		p.userinfo, p.authority, p.hasUser = rest[:at], rest[at+1:end], true
	}
	return p, true
}

// redactURL returns the connection URL s fit to show: the password, in
// the userinfo or as a password parameter, replaced by xxxxx. A URL that
// splitURL cannot tell the password of shows its scheme alone. Parameters
// after a password parameter show only when their name is one libpq
// knows, since a password's unescaped & would make the rest of it look
// like parameters.
func redactURL(s string) string {
	p, ok := splitURL(s)
	if !ok {
		if p.scheme != "" && !strings.ContainsAny(p.scheme, ":/?#@") {
			return p.scheme + "://xxxxx"
		}
		return "xxxxx"
	}
	var b strings.Builder
	b.WriteString(p.scheme + "://")
	if p.hasUser {
		user, _, hasPassword := strings.Cut(p.userinfo, ":")
		b.WriteString(user)
		if hasPassword {
			b.WriteString(":xxxxx")
		}
		b.WriteByte('@')
	}
	b.WriteString(p.authority)
	path, query, hasQuery := strings.Cut(p.rest, "?")
	b.WriteString(path)
	if hasQuery {
		q, _ := redactQuery(query)
		b.WriteByte('?')
		b.WriteString(q)
	}
	return b.String()
}

// redactQuery replaces the value of every password parameter of a URL's
// query (and what may be the rest of it: the parameters after it whose
// name libpq does not know, or that hold a #) with xxxxx. It returns the
// pieces it hid too, for scrub.
func redactQuery(q string) (string, []string) {
	var out, hidden []string
	secret := false // a password parameter came before
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if name, err := url.QueryUnescape(k); err == nil {
			k = name
		}
		k = strings.ToLower(k)
		switch {
		case k == "password":
			out = append(out, "password=xxxxx")
			hidden = append(hidden, v)
			secret = true
		case secret && (!libpqParams[k] || strings.ContainsRune(kv, '#')):
			hidden = append(hidden, kv) // maybe the password's
		default:
			out = append(out, kv)
		}
	}
	return strings.Join(out, "&"), hidden
}

// libpqParams are the names of libpq's connection parameters (and pgx's
// pool settings) that may follow a password parameter in a URL.
var libpqParams = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "passfile": true,
	"channel_binding": true, "connect_timeout": true, "client_encoding": true, "options": true,
	"application_name": true, "fallback_application_name": true, "keepalives": true,
	"keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true,
	"tcp_user_timeout": true, "replication": true, "gssencmode": true, "sslmode": true,
	"requiressl": true, "sslcompression": true, "sslcert": true, "sslkey": true, "sslrootcert": true,
	"sslcrl": true, "sslcrldir": true, "sslsni": true, "requirepeer": true, "ssl_min_protocol_version": true,
	"ssl_max_protocol_version": true, "krbsrvname": true, "gsslib": true, "service": true,
	"target_session_attrs": true, "load_balance_hosts": true, "search_path": true, "timezone": true,
	"pool_max_conns": true, "pool_min_conns": true, "pool_max_conn_lifetime": true,
	"pool_max_conn_idle_time": true, "pool_health_check_period": true, "statement_cache_capacity": true,
	"default_query_exec_mode": true,
}

// scrub removes from msg, text about the URL u (a driver's error), every
// form of u's password: u itself becomes redactURL(u), and the password
// (as written and %-decoded) and anything redactQuery hides become xxxxx.
func scrub(msg, u string) string {
	msg = strings.ReplaceAll(msg, u, redactURL(u))
	var secrets []string
	if p, ok := splitURL(u); ok {
		if _, pw, has := strings.Cut(p.userinfo, ":"); has {
			secrets = append(secrets, pw)
		}
		if _, q, has := strings.Cut(p.rest, "?"); has {
			_, hidden := redactQuery(q)
			secrets = append(secrets, hidden...)
		}
	}
	for _, pw := range secrets {
		for _, part := range strings.FieldsFunc(pw, func(r rune) bool { return r == '=' || r == '#' }) {
			secrets = append(secrets, part)
		}
		if dec, err := url.PathUnescape(pw); err == nil && dec != pw {
			secrets = append(secrets, dec)
		}
		if dec, err := url.QueryUnescape(pw); err == nil && dec != pw {
			secrets = append(secrets, dec)
		}
	}
	// The longest first, so that a part does not leave the rest of a
	// longer one.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, pw := range secrets {
		if pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}
