package pgsink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxIdentifier is PostgreSQL's longest identifier (NAMEDATALEN-1 bytes);
// a longer one would be truncated silently.
const maxIdentifier = 63

// tableWant is ConfigError.Want for a table name that is not one.
const tableWant = "a table name, or schema.table, each of letters, digits, _ and $ (not starting with a digit or $), at most 63 bytes; it is used as written (quoted), so Records and records are different tables"

// parseTable validates a table name, plain or schema-qualified
// (billing.invoices), and returns it as an identifier to quote. Names are
// not case-folded: the table is the one named exactly so.
func parseTable(setting, name string) (pgx.Identifier, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, settingError(setting, name, tableWant)
	}
	for _, p := range parts {
		if p == "" || len(p) > maxIdentifier || !identStart(p[0]) {
			return nil, settingError(setting, name, tableWant)
		}
		for i := 1; i < len(p); i++ {
			if !paramChar(p[i]) && p[i] != '$' {
				return nil, settingError(setting, name, tableWant)
			}
		}
	}
	return pgx.Identifier(parts), nil
}

// table is one table the sink creates: its setting, name, and DDL.
type table struct {
	setting string
	name    string         // as given, for errors
	id      pgx.Identifier // quoted with Sanitize
	columns string         // the columns the sink uses, for checking an existing table
	create  string         // CREATE TABLE IF NOT EXISTS, with %s for the quoted name
}

func offsetsTable(name string, id pgx.Identifier) table {
	return table{
		setting: SettingOffsetsTable, name: name, id: id,
		columns: `"group", topic, "partition", next_offset, updated_at`,
		// One row per group and input partition: the next offset to
		// consume. Commit moves it with a conditional UPDATE; the primary
		// key is what makes two instances' first INSERTs of a partition
		// serialise.
		create: `CREATE TABLE IF NOT EXISTS %s (
	"group" text NOT NULL,
	topic text NOT NULL,
	"partition" int NOT NULL,
	next_offset bigint NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY ("group", topic, "partition")
)`,
	}
}

func recordsTable(name string, id pgx.Identifier) table {
	return table{
		setting: SettingTable, name: name, id: id,
		columns: strings.Join(recordColumns, ", ") + ", written_at",
		// No unique constraint and no index: exactly once is enforced by
		// the offsets, and an index on the source coordinates would cost
		// every COPY its upkeep for the sake of audits, which can create
		// one when they need it (CREATE INDEX ON t (src_topic,
		// src_partition, src_offset)).
		create: `CREATE TABLE IF NOT EXISTS %s (
	src_topic text NOT NULL,
	src_partition int NOT NULL,
	src_offset bigint NOT NULL,
	seq int NOT NULL,
	key bytea,
	value jsonb,
	value_bytes bytea,
	headers jsonb,
	ts timestamptz,
	written_at timestamptz NOT NULL DEFAULT now()
)`,
	}
}

func deadLetterTable(name string, id pgx.Identifier) table {
	return table{
		setting: SettingDeadLetterTable, name: name, id: id,
		columns: "src_topic, src_partition, src_offset, key, value, headers, ts, error, stage, attempts, failed_at",
		create: `CREATE TABLE IF NOT EXISTS %s (
	src_topic text NOT NULL,
	src_partition int NOT NULL,
	src_offset bigint NOT NULL,
	key bytea,
	value bytea,
	headers jsonb,
	ts timestamptz,
	error text NOT NULL,
	stage text NOT NULL,
	attempts int NOT NULL,
	failed_at timestamptz NOT NULL DEFAULT now()
)`,
	}
}

// schemaLock is the key of the advisory lock that serialises the sink's
// CREATE TABLE IF NOT EXISTS across instances starting at once (two
// concurrent ones can otherwise fail on the catalog's unique index).
const schemaLock = 0x70677369_6e6b0001

// ensureTables creates the tables that are missing and checks that each
// has the columns the sink writes, in one transaction. A schema that does
// not exist, or a table without the sink's columns, is a *settings.Error
// naming the table's setting.
func ensureTables(ctx context.Context, tx pgx.Tx, tables []table) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
		return fmt.Errorf("pgsink: taking the schema lock: %w", err)
	}
	for _, t := range tables {
		q := t.id.Sanitize()
		// CREATE TABLE IF NOT EXISTS needs the right to create in the
		// schema even when the table exists: only run it for a table that
		// is missing, so that a user who may only write tables created
		// beforehand can run the sink.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", q).Scan(&exists); err != nil {
			return tableError(t, "looking for", err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, fmt.Sprintf(t.create, q)); err != nil {
				return tableError(t, "creating", err)
			}
		}
		// Parsed and analysed, not run: the columns are checked without
		// needing the right to read them.
		if _, err := tx.Conn().PgConn().Prepare(ctx, "", fmt.Sprintf("SELECT %s FROM %s", t.columns, q), nil); err != nil {
			return tableError(t, "checking the columns of", err)
		}
	}
	return nil
}

// tableError turns a failure on table t into a *settings.Error where the
// setting is what is wrong, or else wraps it.
func tableError(t table, doing string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "3F000": // invalid_schema_name
			return settingError(t.setting, t.name, "a table in a schema that exists (create the schema first): "+pgMessage(err))
		case "42703", "42P01", "42809": // undefined_column, undefined_table, wrong_object_type (e.g. a view)
			return settingError(t.setting, t.name, "a table the sink creates, or an existing one with the columns "+t.columns+": "+pgMessage(err))
		case "42501": // insufficient_privilege
			return fmt.Errorf("pgsink: %s table %s: %s; grant the user the right to create and write it, or create it beforehand", doing, t.id.Sanitize(), pgMessage(err))
		}
	}
	return fmt.Errorf("pgsink: %s table %s: %w", doing, t.id.Sanitize(), err)
}
