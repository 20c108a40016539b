// Command eoscheck audits a run of the processor for exactly-once
// violations, the way Kafka's TransactionsTest and Jepsen's Kafka workload
// do: it reads the input topics, the output topics (twice: as a
// read_committed reader sees them, and read_uncommitted with transaction
// markers to learn which transactions aborted) and the consumer group's
// committed offsets, matches every output to its input through the lineage
// headers the processor writes (processor.source, topic/partition/offset,
// or the legacy processor.source.topic, .partition and .offset; either
// form, record by record), and counts anomalies. With -dlq it also reads the dead-letter
// topics (PROCESSOR_DLQ_TOPIC) and flags every dead letter a read_committed
// reader sees: for runs whose input has no bad records, such as the fault
// drill's.
//
//	eoscheck -brokers 127.0.0.1:9092 -input orders -output orders-processed -group demo
//	eoscheck -input chaos-in -output chaos-out -dlq chaos-dlq -group chaos
//	eoscheck -input chaos-in -output chaos-out -dlq chaos-dlq -group chaos -poison -poison-skip
//	eoscheck -input chaos-in -output chaos-out -group chaos -check aggregate
//	eoscheck -input orders -output counts -group by-customer -check aggregate -group-by .customer
//
// It prints one table to stdout, a row per anomaly with its count and an
// example, then totals and a result line, and exits 0 when clean, 1 when it
// found an anomaly or could not read the cluster (one line on stderr saying
// why), 2 on a usage error.
//
// The anomalies, in plain words:
//
//   - duplicate: a downstream read_committed reader sees the output of one
//     input record twice. With -one-to-one=false (filters, flat-maps) it
//     means one input's outputs in one output partition come from two
//     different committed transactions.
//   - lost: the group has committed past an input record, so it will never
//     be processed again, yet no output of it is visible (-one-to-one only;
//     an output still in an open transaction does not count as lost). A
//     record dropped by PROCESSOR_ON_ERROR=skip shows up here too: lost or
//     skipped, the output is missing. A record with a visible dead letter
//     (-dlq) is not lost; it is a dead-letter.
//   - aborted-read: a read_committed reader was given a record of an aborted
//     transaction.
//   - order: within one output partition, the outputs of one input partition
//     are not in input order (a duplicate's repeat is not counted again).
//   - key-order: within one output partition, the outputs of one key (of
//     one input partition) are not in input order, or its outputs
//     are in two partitions of an output topic; null keys are not judged.
//     What PROCESSOR_ORDERING=key promises; an order anomaly of keyed
//     records is one of these too.
//   - offset-mismatch: output is visible for an input at or past the group's
//     committed offset, so outputs and offsets were not committed together
//     (a torn transaction); or a committed offset lies beyond the input's
//     log end.
//   - uncommitted: input records at or past the group's committed offset, with
//     no visible output, while -expect-all says the run should have
//     processed everything. On a transactional input the committed offset of
//     a caught-up group is one below the log end (a marker sits there); that
//     is not counted.
//   - phantom: a visible output whose lineage headers are missing or
//     malformed, or name a record that is not in the input topics.
//   - hanging: a partition whose last stable offset stayed at one offset
//     below its high watermark for longer than -transaction-timeout: a
//     transaction has been open that long, and read_committed readers of the
//     partition are blocked behind it. Needs -watch longer than the timeout.
//   - stuck: an input partition with records left to read whose committed
//     offset did not move for longer than -stuck-after. Needs -watch longer
//     than that.
//   - dead-letter: a record in a -dlq topic that a read_committed reader
//     sees: the processor gave up on an input (PROCESSOR_ON_ERROR=dlq). The
//     example names its input (from its lineage headers) and its
//     processor.error header, cut to 200 bytes. An input with a dead letter
//     and another visible output or dead letter is also a duplicate.
//
// With -check aggregate the processor ran the aggregate transform
// counting by record key (PROCESSOR_TRANSFORMS=aggregate, or a chain
// ending in it, FUNCTION count, BY unset), as the fault drill's stateful
// mode does: every output's value is its key's updated count,
// {"key": ..., "value": N}. The checks by lineage run as ever (each input
// has exactly one output), and six more rows judge the counts of every
// key in the committed output, in output order:
//
//   - count-repeat: a count not above the one before it (the state went
//     back, or one count is visible twice).
//   - count-gap: a count more than one above the one before it, or a first
//     count above 1 (a count the state kept whose output is not visible).
//   - count-short: the key's last count is below its inputs taken: the
//     inputs with the key that have no visible dead letter, were not
//     skipped by policy and are below the committed offset (or have a
//     visible output).
//   - count-excess: the last count is above its inputs taken (an input
//     counted twice).
//   - count-value: a visible output that is not a count of a keyed record.
//   - count-key: a count whose value's "key" is not its record key (another
//     key, null, absent, or not the key's one rendering: a UTF-8 key as a
//     JSON string, any other as {"base64": ...}), or whose record key is not
//     its input's.
//
// After the totals a line gives the keys, the sum of their last counts and
// the highest.
//
// With -check windows the processor ran a windowed count by record key
// with EMIT=close (PROCESSOR_AGGREGATE_WINDOW=-window, _WINDOW_ADVANCE,
// _GRACE, _EMIT=close; -one-to-one=false), and -late-topic is its
// PROCESSOR_LATE_TOPIC, if any (read as an output topic). The inputs the
// group committed are replayed through a model of the windows by stream
// time (check/windows.go), and four rows judge the committed output:
// window-duplicate (a key and window with more than one final row),
// window-missing (a window closed with inputs counted and no final row),
// window-count (a final row whose count is not its window's inputs that
// were not late: a late record counted, a lost or repeated count; or a
// final row of a window not closed), late-wrong (a late input not in the
// late topic exactly once, or an input in time there). Without a late
// topic the late inputs are counted as dropped on the totals' line.
//
// With -check dedupe the processor ran a dedupe by -dedupe-by
// (PROCESSOR_DEDUPE_BY, _WINDOW=-dedupe-window, _GRACE=-dedupe-grace;
// -one-to-one=false), and -late-topic is its PROCESSOR_LATE_TOPIC, if
// any. The committed inputs are replayed through a model of the dedupe
// by stream time (check/dedupe.go): dedupe-passed (a duplicate, its id
// seen within the window before it, with an output), dedupe-missing (an
// id's first sighting without exactly one output), late-wrong (a late
// input not in the late topic exactly once, or an input in time there).
// With -group-by PATH as well (a path of object members such as
// .customer, the aggregate's PROCESSOR_AGGREGATE_BY) the counts were
// grouped by that member of the input values rather than by record key,
// as for orders keyed by order id and counted per customer: an input's
// group is the member's text (a string's; another value's JSON), and
// every group's counts must run 1, 2, 3, ... in the committed output up
// to its inputs taken across all input partitions. A count kept per
// input partition shows as count-repeat and count-short (its highest
// count below the group's inputs); count-key then means an output whose
// value's "key" is not its record key, or whose record key is not its
// input's group (the output's processor.source names the input it
// counts, through any repartition topic). An input without the member
// has no group, and must have no count. The order row is not judged then
// (through a repartition topic an input partition's records keep their
// order within each group, which key-order judges, not across groups).
// With -check windows, -group-by says the windowed count was grouped so,
// behind a repartition hop, whose order the input does not hold: the
// late topic is the record of the late inputs, each of which must be in
// it once and could be late, every final row is its window's inputs less
// those, and a window whose group's inputs reach its end plus grace must
// have one (tumbling windows only; check/hopwindows.go).
//
// With -poison the input holds the fault drill's marked records, each with
// the key poison-<class>-<seq>, and each is judged by its class: a notjson
// input (not JSON: the jq transform fails it) must have exactly one
// visible dead letter and no output, or, with -poison-skip (some instances
// ran PROCESSOR_ON_ERROR=skip), neither, which is counted as skipped by
// policy; a nearlimit input (JSON of about 1 MB) exactly one output, like
// an ordinary one; a jsonb input (JSON that PostgreSQL's jsonb refuses)
// exactly one row with value NULL and value_bytes holding its "poison"
// member verbatim. Two more anomalies then appear in the table:
//
//   - poison-passed: an input that must fail the chain has a visible output
//     or a row.
//   - misstored (PostgreSQL): a jsonb input's row with a value in the jsonb
//     column, or value_bytes without its poison member; a nearlimit input's
//     row without the jsonb value.
//
// A dead letter of a notjson input is then no dead-letter anomaly; every
// other one still is. After the totals, one line per class present counts
// its inputs, those with an output (or row), with a dead letter and
// skipped by policy.
//
// A run into PostgreSQL (PROCESSOR_SINK=postgres) has no output topics: with
// -postgres-url, eoscheck reads the input topics from Kafka and, in one
// snapshot of the database, the records table (-table), the dead-letter
// table (-dead-letter-table, optional like -dlq) and the group's stored
// next offsets (-offsets-table), which are the truth there. Every input
// must appear exactly once across the two tables by its source coordinates
// (src_topic, src_partition, src_offset): one row of seq 0 with
// -one-to-one, else no seq twice. Its table lists duplicate, lost,
// offset-mismatch (a row at or past its partition's stored next offset, a
// stored offset beyond the log end), uncommitted (a stored offset short of
// the input's end), phantom (a row naming no input record) and dead-letter
// (every dead-letter row), then the numbers of inputs, rows, dead letters
// and partitions whose stored offset is the log end (see
// check.CheckDatabase).
//
//	eoscheck -input chaos-in -group chaos -postgres-url postgres://u:p@127.0.0.1:5432/db -table chaos_x -dead-letter-table chaos_dl_x
//
// Run it against a processor that has stopped or caught up: against a
// running one, inputs arriving and transactions in flight show up as
// uncommitted and pending outputs. The group's offsets are read once before
// and once after the outputs' ends, so progress made during the read is not
// mistaken for lost or torn output. Records deleted by retention before the
// read make their outputs phantom.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/interrupt"
)

func main() {
	ctx, stop := interrupt.Context()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	brokers, inputs, outputs []string
	deadLetters              []string
	group                    string
	replayGroup              string // -replay-group
	opts                     check.Options
	watch, timeout           time.Duration
	sampleEvery              time.Duration
	// tables, with a PostgreSQL URL, audits a run into PostgreSQL.
	tables check.Tables
	// poison: read the drill's marks from the input keys (-poison).
	poison bool
	// aggregate: judge the outputs as counts by key (-check aggregate).
	aggregate bool
	// windows: judge the outputs as final rows of windows (-check
	// windows), with these settings.
	windows check.Windows
	// dedupe: judge the outputs as a dedupe by dedupeBy (-check dedupe),
	// with these settings.
	dedupe   check.Dedupe
	dedupeBy string
	join     joinConfig // -check join
}

// knownChecks are the extra checks -check takes.
var knownChecks = []string{"aggregate", "windows", "dedupe", "join"}

const usageText = `usage: eoscheck -input TOPICS -output TOPICS -group GROUP [flags]
       eoscheck -input TOPICS -group GROUP -postgres-url URL -table TABLE [-dead-letter-table TABLE] [flags]

Audits a processor run for exactly-once violations and prints a table of
anomalies. Exit 0 clean, 1 anomalies found or cluster unreadable, 2 usage.

`

func parse(args []string, stdout io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("eoscheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	brokers := fs.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers, host:port")
	inputs := fs.String("input", "", "comma-separated input topics (required)")
	outputs := fs.String("output", "", "comma-separated output topics (required)")
	dlq := fs.String("dlq", "", "comma-separated dead-letter topics: every dead letter visible in them is an anomaly (for runs without bad records)")
	fs.StringVar(&c.group, "group", "", "the processor's consumer group (required)")
	fs.StringVar(&c.replayGroup, "replay-group", "", "with -dlq: the consumer group of processor replay (<group>-replay): dead letters below its committed offsets were run again and are not counted; each input's outputs, the replay's included, must be exactly once")
	fs.BoolVar(&c.opts.OneToOne, "one-to-one", true, "every input has exactly one output (identity-like transforms); false for filters and flat-maps")
	fs.BoolVar(&c.opts.ExpectAll, "expect-all", true, "the group must have committed all input")
	fs.BoolVar(&c.opts.AtLeastOnce, "at-least-once", false, "the processor ran PROCESSOR_GUARANTEE=at_least_once: inputs written more than once are counted, not anomalies; lost still is")
	fs.DurationVar(&c.opts.TransactionTimeout, "transaction-timeout", 40*time.Second, "a transaction open longer than this is hanging")
	fs.DurationVar(&c.watch, "watch", 0, "sample partition ends and group offsets every second for this long, for hanging and stuck (0: one sample)")
	fs.DurationVar(&c.opts.StuckAfter, "stuck-after", 30*time.Second, "an input partition with lag whose committed offset does not move for this long is stuck")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "how long reading the topics and offsets may take")
	fs.StringVar(&c.tables.URL, "postgres-url", "", "audit a run into PostgreSQL (PROCESSOR_SINK=postgres) in this database, postgres://user:password@host:port/db?sslmode=...; instead of -output")
	fs.StringVar(&c.tables.Records, "table", check.DefaultTable, "with -postgres-url: the records table (PROCESSOR_POSTGRES_TABLE)")
	fs.StringVar(&c.tables.DeadLetters, "dead-letter-table", "", "with -postgres-url: the dead-letter table (PROCESSOR_POSTGRES_DEAD_LETTER_TABLE); every row in it is an anomaly (for runs without bad records)")
	fs.StringVar(&c.tables.Offsets, "offsets-table", check.DefaultOffsetsTable, "with -postgres-url: the table of the groups' stored next offsets")
	fs.BoolVar(&c.poison, "poison", false, "the input holds the fault drill's marked records (key poison-<class>-<seq>): judge each by its class (notjson: one dead letter; nearlimit: one output; jsonb: one row with value NULL and value_bytes)")
	fs.BoolVar(&c.opts.Skipping, "poison-skip", false, "with -poison: some instances ran PROCESSOR_ON_ERROR=skip, so a notjson input with neither output nor dead letter is skipped by policy, not lost")
	groupBy := fs.String("group-by", "", "with -check aggregate: the counts were grouped by this member of the input values (the aggregate's BY, e.g. .customer), not by record key: each group's counts run 1, 2, 3, ... across all input partitions up to its inputs taken, each output keyed by its input's group; with -check windows: the windowed count was grouped so, behind a repartition hop, the late topic taken as the record of the late inputs")
	checks := fs.String("check", "", "extra checks, comma-separated: aggregate (the processor counted by record key with the aggregate transform: every key's counts run 1, 2, 3, ... in the committed output up to its inputs taken); windows (a windowed count by record key with EMIT=close: exactly one final row per key and window, each its inputs that were not late, every late input in -late-topic once); dedupe (a dedupe by -dedupe-by: every id's first sighting within -dedupe-window passes once, its duplicates never, every input late by -dedupe-grace in -late-topic once); join (a join with -join-table: every row an output carries is a committed version of its key, never older than an earlier input of its partition and key saw)")
	windowFlags(fs, &c)
	dedupeFlags(fs, &c)
	joinFlags(fs, &c)
	err := fs.Parse(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, usageText)
			fs.PrintDefaults()
		}
		return c, err
	}
	c.sampleEvery = time.Second
	c.brokers, c.inputs, c.outputs, c.deadLetters = split(*brokers), split(*inputs), split(*outputs), split(*dlq)
	if c.opts.Skipping && !c.poison {
		return c, errors.New("-poison-skip needs -poison")
	}
	if err := parseChecks(&c, *checks); err != nil {
		return c, err
	}
	if err := parseGroupBy(&c, *groupBy); err != nil {
		return c, err
	}
	if c.tables.URL != "" {
		return c, parseDatabase(&c, fs)
	}
	if err := noTableFlags(fs); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case len(c.brokers) == 0:
		return c, errors.New("-brokers is empty: want host:port[,host:port...]")
	case len(c.inputs) == 0:
		return c, errors.New("-input is required: the processor's input topics, comma-separated")
	case len(c.outputs) == 0:
		return c, errors.New("-output is required: the processor's output topics, comma-separated")
	case c.group == "":
		return c, errors.New("-group is required: the processor's consumer group")
	case c.replayGroup != "" && len(c.deadLetters) == 0:
		return c, errors.New("-replay-group needs -dlq: the dead-letter topics it replayed")
	case c.opts.TransactionTimeout <= 0:
		return c, fmt.Errorf("-transaction-timeout %s must be positive", c.opts.TransactionTimeout)
	case c.opts.StuckAfter <= 0:
		return c, fmt.Errorf("-stuck-after %s must be positive", c.opts.StuckAfter)
	case c.watch < 0:
		return c, fmt.Errorf("-watch %s must not be negative", c.watch)
	case c.timeout <= 0:
		return c, fmt.Errorf("-timeout %s must be positive", c.timeout)
	}
	return c, checkTopics(c)
}

// noTableFlags refuses the database flags given without -postgres-url.
func noTableFlags(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"table", "dead-letter-table", "offsets-table"} {
		if set[name] {
			return fmt.Errorf("-%s needs -postgres-url", name)
		}
	}
	return nil
}

// checkTopics refuses a topic given in two roles.
func checkTopics(c config) error {
	for _, t := range c.outputs {
		if slices.Contains(c.inputs, t) {
			return fmt.Errorf("topic %q is both -input and -output", t)
		}
	}
	for _, t := range c.deadLetters {
		if slices.Contains(c.inputs, t) || slices.Contains(c.outputs, t) {
			return fmt.Errorf("topic %q is both -dlq and -input or -output", t)
		}
	}
	return nil
}

// parseDatabase checks the command line of a run into PostgreSQL.
func parseDatabase(c *config, fs *flag.FlagSet) error {
	c.tables.Group, c.tables.Inputs = c.group, c.inputs
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case len(c.brokers) == 0:
		return errors.New("-brokers is empty: want host:port[,host:port...]")
	case len(c.inputs) == 0:
		return errors.New("-input is required: the processor's input topics, comma-separated")
	case c.group == "":
		return errors.New("-group is required: the processor's consumer group")
	case len(c.outputs) > 0 || len(c.deadLetters) > 0:
		return errors.New("-output and -dlq do not go with -postgres-url: a run into PostgreSQL writes tables (-table, -dead-letter-table)")
	case c.opts.AtLeastOnce:
		return errors.New("-at-least-once does not go with -postgres-url: the postgres sink runs exactly once only")
	case c.watch != 0:
		return errors.New("-watch does not go with -postgres-url: hanging transactions and stuck partitions are Kafka checks")
	case c.timeout <= 0:
		return fmt.Errorf("-timeout %s must be positive", c.timeout)
	}
	for _, t := range []struct{ flag, name string }{{"table", c.tables.Records}, {"dead-letter-table", c.tables.DeadLetters}, {"offsets-table", c.tables.Offsets}} {
		if t.name == "" && t.flag != "dead-letter-table" {
			return fmt.Errorf("-%s is empty: want a table name, or schema.table", t.flag)
		}
		if t.name != "" && !check.ValidTable(t.name) {
			return fmt.Errorf("-%s %q: want a table name, or schema.table", t.flag, t.name)
		}
	}
	if c.tables.DeadLetters != "" && (c.tables.DeadLetters == c.tables.Records || c.tables.DeadLetters == c.tables.Offsets) || c.tables.Records == c.tables.Offsets {
		return errors.New("-table, -dead-letter-table and -offsets-table must name different tables")
	}
	return nil
}

// split splits a comma-separated list, dropping empty items.
func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run is the command: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "eoscheck: %v (see eoscheck -h)\n", err)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "eoscheck: %v\n", err)
		return 1
	}
	if c.watch > 0 && c.watch <= c.opts.TransactionTimeout {
		fmt.Fprintf(stderr, "eoscheck: note: -watch %s is not longer than -transaction-timeout %s: hanging transactions cannot be seen\n", c.watch, c.opts.TransactionTimeout)
	}
	if c.watch > 0 && c.watch <= c.opts.StuckAfter {
		fmt.Fprintf(stderr, "eoscheck: note: -watch %s is not longer than -stuck-after %s: stuck partitions cannot be seen\n", c.watch, c.opts.StuckAfter)
	}

	if c.tables.URL != "" {
		return runDatabase(ctx, c, stdout, fail)
	}

	src := check.Source{Brokers: c.brokers, Inputs: c.inputs, Outputs: c.outputs, DeadLetters: c.deadLetters, Group: c.group,
		Poison: c.poison, Aggregate: c.aggregate, GroupBy: c.opts.GroupBy, Windows: c.opts.Windows != nil,
		ReplayGroup: c.replayGroup}
	if c.opts.Dedupe != nil {
		src.Dedupe = true
		src.GroupBy, _ = check.ParseGroupPath(c.dedupeBy) // parseDedupe checked it
	}
	joinSource(&src, c)
	r, err := check.NewReader(src)
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	if err := ping(ctx, r, c.timeout); err != nil {
		return fail(err)
	}

	watchCtx, cancel := context.WithTimeout(ctx, c.watch+c.timeout)
	samples, err := r.Watch(watchCtx, c.watch, c.sampleEvery)
	cancel()
	if err != nil {
		return fail(fmt.Errorf("sampling: %w", err))
	}

	readCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	runData, err := r.Read(readCtx)
	if err != nil {
		return fail(err)
	}
	runData.Samples = samples

	rep := check.Check(runData, c.opts)
	fmt.Fprint(stdout, rep.Table())
	if !rep.Clean() {
		return 1
	}
	return 0
}

// ping checks that the brokers answer, within timeout and at most 15s.
func ping(ctx context.Context, r *check.Reader, timeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, min(timeout, 15*time.Second))
	defer cancel()
	return r.Ping(pctx)
}

// runDatabase audits a run into PostgreSQL: the tables' snapshot first,
// then the input up to its ends, so that every input a stored offset
// covers is read, and a stored offset beyond the end is one.
func runDatabase(ctx context.Context, c config, stdout io.Writer, fail func(error) int) int {
	r, err := check.NewReader(check.Source{Brokers: c.brokers, Inputs: c.inputs, Group: c.group, Poison: c.poison})
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	if err := ping(ctx, r, c.timeout); err != nil {
		return fail(err)
	}
	readCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	run, err := check.ReadTables(readCtx, c.tables)
	if err != nil {
		return fail(err)
	}
	if run.Inputs, run.InputEnds, run.Marks, err = r.ReadInputs(readCtx); err != nil {
		return fail(err)
	}
	rep := check.CheckDatabase(run, c.opts)
	fmt.Fprint(stdout, rep.Table())
	if !rep.Clean() {
		return 1
	}
	return 0
}
