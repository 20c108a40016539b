package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/streamproc/processor/record"
)

// The PostgreSQL sink's default table names: of the records table
// (PROCESSOR_POSTGRES_TABLE) and of the table of stored next offsets. The
// tables' layout is a public interface that the auditor reads as it is,
// without linking the sink (a test holds these equal to pgsink's).
const (
	DefaultTable        = "processor_records"
	DefaultOffsetsTable = "processor_offsets"
)

// Tables names the PostgreSQL sink's tables of one run and how to reach
// them.
type Tables struct {
	// URL is a PostgreSQL connection URL; it is never part of an error.
	URL string
	// Records is the records table (PROCESSOR_POSTGRES_TABLE), possibly
	// schema-qualified; required.
	Records string
	// DeadLetters is the dead-letter table
	// (PROCESSOR_POSTGRES_DEAD_LETTER_TABLE); empty: not read.
	DeadLetters string
	// Offsets is the offsets table; empty means DefaultOffsetsTable.
	Offsets string
	// Group is the consumer group whose stored offsets are read.
	Group string
	// Inputs are the input topics: stored offsets of other topics are
	// left out, as eoscheck leaves out a group's other Kafka offsets.
	Inputs []string
}

// ValidTable reports whether name is a table name as the sink takes it:
// table or schema.table, used as written.
func ValidTable(name string) bool {
	parts := strings.Split(name, ".")
	return len(parts) <= 2 && !slices.Contains(parts, "")
}

// tableID turns a table name as the sink takes it into a quoted
// identifier.
func tableID(name string) (string, error) {
	if !ValidTable(name) {
		return "", fmt.Errorf("table name %q: want table or schema.table", name)
	}
	return pgx.Identifier(strings.Split(name, ".")).Sanitize(), nil
}

// ReadTables reads the records table, the dead-letter table (when named)
// and the group's stored offsets in one read-only REPEATABLE READ
// transaction, so that all three are one snapshot: a commit of the
// processor is in it with its rows and its offsets, or not at all. It
// fills Rows, DeadLetters, Stored, Table and DeadLetterTable of the
// returned run. Read the input ends after it, so that stored offsets
// beyond the log end are real.
func ReadTables(ctx context.Context, t Tables) (DatabaseRun, error) {
	run := DatabaseRun{Table: t.Records, DeadLetterTable: t.DeadLetters, Stored: map[record.TopicPartition]int64{}}
	if t.Offsets == "" {
		t.Offsets = DefaultOffsetsTable
	}
	if t.Records == "" || t.Group == "" || len(t.Inputs) == 0 {
		return run, errors.New("the records table, the group and the input topics are all required")
	}
	records, err := tableID(t.Records)
	if err != nil {
		return run, err
	}
	offsets, err := tableID(t.Offsets)
	if err != nil {
		return run, err
	}
	var dead string
	if t.DeadLetters != "" {
		if dead, err = tableID(t.DeadLetters); err != nil {
			return run, err
		}
	}
	cfg, err := pgx.ParseConfig(t.URL)
	if err != nil {
		// Not wrapped: the parser's message may quote the URL, password
		// and all.
		return run, errors.New("the PostgreSQL URL cannot be parsed: want postgres://user:password@host:port/database?sslmode=...")
	}
	where := fmt.Sprintf("PostgreSQL at %s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return run, fmt.Errorf("connecting to %s: %w", where, err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return run, fmt.Errorf("%s: beginning the snapshot: %w", where, err)
	}
	defer tx.Rollback(context.Background())

	var r Row
	err = readTable(ctx, tx, where, t.Records, `SELECT src_topic, src_partition, src_offset, seq, value IS NOT NULL, value_bytes FROM `+records,
		[]any{&r.Source.Topic, &r.Source.Partition, &r.Source.Offset, &r.Seq, &r.JSON, &r.Bytes}, func() {
			run.Rows = append(run.Rows, r)
			r.Bytes = nil // pgx reuses a non-nil slice
		})
	if err != nil {
		return run, err
	}
	if dead != "" {
		run.DeadLetters = []DeadLetterRow{}
		var d DeadLetterRow
		err = readTable(ctx, tx, where, t.DeadLetters, `SELECT src_topic, src_partition, src_offset, error, stage, attempts FROM `+dead,
			[]any{&d.Source.Topic, &d.Source.Partition, &d.Source.Offset, &d.Error, &d.Stage, &d.Attempts}, func() {
				d.Error = TruncateError(d.Error)
				run.DeadLetters = append(run.DeadLetters, d)
			})
		if err != nil {
			return run, err
		}
	}
	var tp record.TopicPartition
	var next int64
	err = readTable(ctx, tx, where, t.Offsets, `SELECT topic, "partition", next_offset FROM `+offsets+` WHERE "group" = $1`,
		[]any{&tp.Topic, &tp.Partition, &next}, func() {
			if slices.Contains(t.Inputs, tp.Topic) {
				run.Stored[tp] = next
			}
		}, t.Group)
	if err != nil {
		return run, err
	}
	if err := tx.Commit(ctx); err != nil {
		return run, fmt.Errorf("%s: ending the snapshot: %w", where, err)
	}
	return run, nil
}

// readTable runs query (args its arguments) on table name, scanning each
// row into dest and then calling each.
func readTable(ctx context.Context, tx pgx.Tx, where, name, query string, dest []any, each func(), args ...any) error {
	rs, err := tx.Query(ctx, query, args...)
	if err == nil {
		_, err = pgx.ForEachRow(rs, dest, func() error { each(); return nil })
	}
	if err != nil {
		return tableErr(where, name, err)
	}
	return nil
}

// tableErr wraps a failure to read table name, saying so plainly when the
// table does not exist or lacks the sink's columns.
func tableErr(where, name string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "42P01": // undefined_table
			return fmt.Errorf("%s: table %s does not exist (is it the run's table?)", where, name)
		case "42703": // undefined_column
			return fmt.Errorf("%s: table %s is not one of the postgres sink's: %s", where, name, pe.Message)
		}
	}
	return fmt.Errorf("%s: reading table %s: %w", where, name, err)
}
