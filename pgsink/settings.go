package pgsink

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
)

// The sink registered as "postgres": its declared settings, and how the
// processor opens it from them.

func init() {
	spec := sink.Typed("rows and offsets in one PostgreSQL transaction per batch (see docs/postgres.md)", openSettings, names)
	spec.Title = "PostgreSQL"
	spec.Metrics = func(register func(any) error) (err error) {
		defer func() {
			if r := recover(); r != nil { // NewMetrics's MustRegister
				err = fmt.Errorf("pgsink: registering its metrics: %v", r)
			}
		}()
		NewMetrics(registerer(register))
		return nil
	}
	sink.Register("postgres", spec)
}

// Settings are the postgres sink's declared settings.
type Settings struct {
	URL             settings.Secret `setting:"URL" required:"true" secret:"true" form:"a PostgreSQL URL, e.g. postgres://processor@db:5432/billing?sslmode=verify-full (never shown)" doc:"the database the postgres sink writes to; any libpq URL parameter works (sslmode, sslrootcert, connect_timeout); required with the postgres sink; never logged or shown"`
	PasswordFile    string          `setting:"PASSWORD_FILE" form:"a path to a file holding the database password, e.g. /var/run/secrets/db/password" doc:"a file holding the database user's password, read at start and again before each new connection (a rotated password is used from then on), replacing any password in the URL; a trailing newline is dropped"`
	Table           string          `setting:"TABLE" default:"processor_records" form:"a table name, optionally schema-qualified, e.g. billing.records" doc:"the table the postgres sink writes outputs to (created if missing, with the record's key, value, headers, timestamp and source coordinates); not used with a statement"`
	Statement       string          `setting:"STATEMENT" form:"one SQL statement with @parameters, e.g. INSERT INTO invoices (order_id, doc) VALUES ((@value::jsonb->>'order_id')::int, @value::jsonb) ON CONFLICT (order_id) DO NOTHING" doc:"instead of the table, the SQL the postgres sink runs once per output, e.g. an upsert into your own schema; parameters @key, @key_text, @value (JSON text), @value_text, @value_bytes, @topic, @partition, @offset, @seq, @timestamp and @header_<name>"`
	DeadLetterTable string          `setting:"DEAD_LETTER_TABLE" default:"processor_dead_letters" form:"a table name, optionally schema-qualified" doc:"the table the postgres sink writes dead letters to under the dlq error policy, in the same database transaction (created if missing)"`
}

// Options returns the Options of s for group, reading the password file.
// A file that cannot be read, or is empty, is a *settings.Error.
func (s *Settings) Options(group string) (Options, error) {
	o := Options{URL: s.URL.Reveal(), Table: s.Table, Statement: s.Statement, DeadLetterTable: s.DeadLetterTable, Group: group}
	if s.PasswordFile == "" {
		return o, nil
	}
	pw, err := ReadPasswordFile(s.PasswordFile)
	if err != nil {
		return o, &settings.Error{Field: SettingPasswordFile, Value: s.PasswordFile, Want: settings.Say("a readable file holding the database password (" + err.Error() + ")")}
	}
	o.Password, o.PasswordFile = pw, s.PasswordFile
	return o, nil
}

// openSettings opens the sink as the processor does. Open's errors are
// the contract's: a *settings.Error for a setting that cannot work, a
// *sink.RefusedError for a server that refuses the user, the password or
// the database.
func openSettings(ctx context.Context, s *Settings, h sink.Host) (sink.Transactional, func(), error) {
	o, err := s.Options(h.Group)
	if err != nil {
		return nil, nil, err
	}
	o.Logger = h.Logger
	if h.Register != nil {
		o.Metrics = NewMetrics(registerer(h.Register))
	}
	db, err := Open(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	return db, db.Close, nil
}

// Names are what the pipeline calls the sink's destinations where Kafka
// has topics: the records table (or "statement") and the dead-letter
// table, e.g. postgres:processor_records. They label
// processor_records_produced_total.
func (s *Sink) Names() (outputs, deadLetters string) {
	stmt := ""
	if s.stmt != nil {
		stmt = s.stmt.src
	}
	return destinationNames(s.recName, stmt, s.dlName)
}

// names are what the pipeline calls the sink's destinations: the records
// table (or the statement) and the dead-letter table.
func names(s *Settings) (string, string) {
	return destinationNames(s.Table, s.Statement, s.DeadLetterTable)
}

func destinationNames(table, statement, deadLetters string) (string, string) {
	out := "postgres:" + table
	if statement != "" {
		out = "postgres:statement"
	}
	return out, "postgres:" + deadLetters
}

// registerer is a prometheus.Registerer of the host's Register.
type registerer func(collector any) error

func (r registerer) Register(c prometheus.Collector) error { return r(c) }

func (r registerer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r(c); err != nil {
			panic(err)
		}
	}
}

func (r registerer) Unregister(prometheus.Collector) bool { return false }
