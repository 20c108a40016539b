package check

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	"github.com/streamproc/processor/record"
)

// A run into PostgreSQL (PROCESSOR_SINK=postgres) has no output topics: each
// batch's outputs are rows of a records table, its dead letters rows of a
// dead-letter table, and the consumed next offsets rows of an offsets table,
// all written in one database transaction. The offsets table is the truth
// there (the group's offsets in Kafka are a copy for lag tools), so
// CheckDatabase judges the rows against it.

// Row is a row of the PostgreSQL sink's records table, as far as the
// checker needs it: the coordinates of the input record it was made from
// (src_topic, src_partition, src_offset) and its index among that input's
// outputs (seq, from 0).
type Row struct {
	Source Input
	Seq    int
	// JSON: the value column (jsonb) is not NULL. Bytes is value_bytes,
	// nil when NULL. Only marked inputs' rows are judged by them
	// (misstored).
	JSON  bool
	Bytes []byte
}

// String returns "topic/partition@offset seq N".
func (r Row) String() string { return r.Source.String() + " seq " + strconv.Itoa(r.Seq) }

// DeadLetterRow is a row of the PostgreSQL sink's dead-letter table: an
// input the processor gave up on (PROCESSOR_ON_ERROR=dlq).
type DeadLetterRow struct {
	Source Input
	// Error is the error column, cut to about MaxErrorLen bytes; Stage
	// (where it failed, e.g. the transform) and Attempts are the
	// columns of the same names.
	Error    string
	Stage    string
	Attempts int
}

// DatabaseRun is everything known about one processor run into
// PostgreSQL: the input records that exist and the tables as one snapshot
// of the database saw them.
type DatabaseRun struct {
	// Inputs are the input records that exist (read_committed).
	Inputs []Input
	// InputEnds is the log-end offset (high watermark) of every input
	// partition, including empty ones, taken after the snapshot.
	InputEnds map[record.TopicPartition]int64
	// Stored is the next offset the offsets table holds for the group,
	// per input partition that has a row.
	Stored map[record.TopicPartition]int64
	// Rows are all rows of the records table.
	Rows []Row
	// DeadLetters are all rows of the dead-letter table; nil when it was
	// not read. Each is a dead-letter anomaly.
	DeadLetters []DeadLetterRow
	// Table and DeadLetterTable name the tables, for the report;
	// DeadLetterTable is empty when it was not read.
	Table, DeadLetterTable string
	// Marks are the fault drill's marks of the inputs that have one
	// (Source.Poison); nil or missing: Ordinary.
	Marks map[Input]Mark
}

// DatabaseAnomalies are the anomalies CheckDatabase can find, in report
// order: a table has no transactions to abort or hang, and rows have no
// order a reader depends on.
var DatabaseAnomalies = []Anomaly{Duplicate, Lost, OffsetMismatch, Uncommitted, Phantom, DeadLetter, PoisonPassed, Misstored}

// CheckDatabase audits a run into PostgreSQL. Every input must appear
// exactly once across the two tables, by its source coordinates:
//
//   - duplicate: an input with more than one row (Options.OneToOne), or
//     two rows of the same seq (without OneToOne: one output written
//     twice), or a dead letter beside a row or another dead letter.
//   - lost (OneToOne only): an input below its partition's stored next
//     offset with no row of seq 0 and no dead letter: lost or skipped.
//   - offset-mismatch: a row or dead letter at or past its partition's
//     stored next offset (rows and offsets were not written together),
//     a stored offset beyond the input partition's log end, or one for a
//     partition the input topic does not have.
//   - uncommitted (Options.ExpectAll): an input at or past the stored
//     next offset without any row: the group did not consume everything.
//   - phantom: a row whose coordinates name no input record.
//   - dead-letter: every row of the dead-letter table but those of inputs
//     whose mark says they fail (NotJSON), like eoscheck's -dlq.
//   - poison-passed: an input whose mark says it fails with a row.
//   - misstored: the row of a JSONBRefused input with a value in the
//     jsonb column, or whose value_bytes do not hold the mark's payload;
//     the row of a NearLimit input without the jsonb value.
//
// A NotJSON input without row or dead letter below the stored offset is
// lost, or with Options.Skipping skipped by policy (Report.Classes).
//
// Options.AtLeastOnce, TransactionTimeout and StuckAfter do not apply: the
// postgres sink only runs exactly once.
func CheckDatabase(run DatabaseRun, opts Options) Report {
	rep, rp := newReport(DatabaseAnomalies, opts.MaxExamples)
	tot := &DatabaseTotals{Table: run.Table, DeadLetterTable: run.DeadLetterTable}
	rep.Database = tot
	a := &dbAudit{run: run, opts: opts, rep: rep, rp: rp, tot: tot,
		inputTopics: map[string]bool{}, byInput: map[Input][]Row{}, dead: map[Input][]DeadLetterRow{}}
	a.inputs, a.exists = uniqueInputs(run.Inputs)
	rep.Inputs = len(a.inputs)
	for tp := range run.InputEnds {
		a.inputTopics[tp.Topic] = true
	}
	for _, in := range a.inputs {
		a.inputTopics[in.Topic] = true
	}
	a.checkRows()
	a.checkDeadLetters()
	totals := classTotals(run.Marks)
	for _, in := range a.inputs {
		a.checkInput(in, totals)
	}
	rep.Classes = totals
	a.checkStored()
	return *rep
}

// dbAudit is one run of CheckDatabase: the run and its options, the report
// it fills, and the rows and dead letters by input.
type dbAudit struct {
	run  DatabaseRun
	opts Options
	rep  *Report
	rp   reporter
	tot  *DatabaseTotals

	inputs      []Input // sorted, without repeats
	exists      map[Input]bool
	inputTopics map[string]bool
	byInput     map[Input][]Row           // existing input -> its rows, by seq
	dead        map[Input][]DeadLetterRow // existing input -> its dead letters
}

// pastStored reports whether src lies at or past its partition's stored
// next offset (0 without one), and returns that offset.
func (a *dbAudit) pastStored(src Input) (int64, bool) {
	c := committedAt(a.run.Stored, src.TP())
	return c, a.inputTopics[src.Topic] && src.Offset >= c
}

// checkRows sorts the rows by input and seq, and flags those past the
// stored offset (offset-mismatch) or of no input (phantom).
func (a *dbAudit) checkRows() {
	rows := slices.Clone(a.run.Rows)
	slices.SortFunc(rows, func(x, y Row) int { return cmp.Or(cmpInput(x.Source, y.Source), cmp.Compare(x.Seq, y.Seq)) })
	a.tot.Rows = len(rows)
	for _, r := range rows {
		if c, past := a.pastStored(r.Source); past {
			a.rp.add(OffsetMismatch, "row %s of %s is at or past the stored next offset %d of %s", r, a.run.Table, c, r.Source.TP())
		}
		if !a.exists[r.Source] {
			a.rp.add(Phantom, "row %s of %s names no input record", r, a.run.Table)
			continue
		}
		a.byInput[r.Source] = append(a.byInput[r.Source], r)
	}
}

// checkDeadLetters flags every dead-letter row but those of inputs whose
// mark says they fail, and those past the stored offset.
func (a *dbAudit) checkDeadLetters() {
	dls := slices.Clone(a.run.DeadLetters)
	slices.SortStableFunc(dls, func(x, y DeadLetterRow) int { return cmpInput(x.Source, y.Source) })
	a.tot.DeadLetters = len(dls)
	table := a.run.DeadLetterTable
	for _, d := range dls {
		msg := strconv.Quote(TruncateError(d.Error))
		if d.Error == "" {
			msg = "empty"
		}
		if a.exists[d.Source] && a.run.Marks[d.Source].Class.Fails() {
			a.dead[d.Source] = append(a.dead[d.Source], d) // what its class must become
		} else if a.exists[d.Source] {
			a.rp.add(DeadLetter, "%s has a dead letter in %s, stage %q, attempts %d, error %s", d.Source, table, d.Stage, d.Attempts, msg)
			a.dead[d.Source] = append(a.dead[d.Source], d)
		} else {
			a.rp.add(DeadLetter, "a dead letter in %s names %s, which is not an input record, error %s", table, d.Source, msg)
		}
		if c, past := a.pastStored(d.Source); past {
			a.rp.add(OffsetMismatch, "the dead letter of %s in %s is at or past the stored next offset %d of %s", d.Source, table, c, d.Source.TP())
		}
	}
}

// checkInput judges one input: its rows by its mark, duplicates, and,
// against the stored next offset, uncommitted or lost (or skipped by
// policy); it adds the input to its class's totals.
func (a *dbAudit) checkInput(in Input, totals map[Class]*ClassTotals) {
	rs, dl := a.byInput[in], a.dead[in]
	mark := a.run.Marks[in]
	judgeRows(a.rp, a.run.Table, in, mark, rs)
	switch {
	case len(dl) > 1 || len(dl) == 1 && len(rs) > 0:
		a.rp.add(Duplicate, "%s has %d rows (%s) and %d dead letters", in, len(rs), seqList(rs), len(dl))
	case a.opts.OneToOne && len(rs) > 1:
		a.rp.add(Duplicate, "%s has %d rows (%s), want one", in, len(rs), seqList(rs))
	case !a.opts.OneToOne:
		for i := 1; i < len(rs); i++ {
			if rs[i].Seq == rs[i-1].Seq {
				a.rp.add(Duplicate, "%s has seq %d twice (%s)", in, rs[i].Seq, seqList(rs))
				break
			}
		}
	}
	c := committedAt(a.run.Stored, in.TP())
	if in.Offset >= c {
		if len(rs) == 0 && len(dl) == 0 && a.opts.ExpectAll {
			a.rp.add(Uncommitted, "%s is at or past the stored next offset %d", in, c)
		}
		countClass(totals, mark.Class, len(rs) > 0, len(dl) > 0, false)
		return
	}
	skipped := false
	if a.opts.OneToOne && len(dl) == 0 && !slices.ContainsFunc(rs, func(r Row) bool { return r.Seq == 0 }) {
		what := "no row"
		if len(rs) > 0 {
			what = "no row of seq 0 (" + seqList(rs) + ")"
		}
		if mark.Class.Fails() && a.opts.Skipping && len(rs) == 0 {
			skipped = true
		} else {
			a.rp.add(Lost, "%s is below the stored next offset %d but has %s and no dead letter (lost or skipped)", mark.of(in), c, what)
		}
	}
	countClass(totals, mark.Class, len(rs) > 0, len(dl) > 0, skipped)
}

// checkStored flags stored offsets beyond the log or of partitions that do
// not exist, and counts the partitions with a stored offset and at the end.
func (a *dbAudit) checkStored() {
	stored, ends := a.run.Stored, a.run.InputEnds
	for _, tp := range sortedKeys(stored) {
		end, ok := ends[tp]
		switch {
		case !ok:
			a.rp.add(OffsetMismatch, "%s: a next offset %d is stored for a partition the input does not have", tp, stored[tp])
		case stored[tp] > end:
			a.rp.add(OffsetMismatch, "%s: stored next offset %d is beyond the log end %d", tp, stored[tp], end)
		}
	}
	for _, tp := range sortedKeys(ends) {
		a.tot.Partitions++
		if s, ok := stored[tp]; ok {
			a.tot.Stored++
			if s == ends[tp] {
				a.tot.AtEnd++
			}
		} else if ends[tp] == 0 {
			a.tot.AtEnd++ // empty, nothing to consume
		}
	}
}

// DatabaseTotals are the totals of a CheckDatabase report.
type DatabaseTotals struct {
	// Table and DeadLetterTable name the tables read (DeadLetterTable
	// empty: not read).
	Table, DeadLetterTable string
	Rows                   int // rows of the records table
	DeadLetters            int // rows of the dead-letter table
	Partitions             int // input partitions
	Stored                 int // input partitions with a stored next offset
	AtEnd                  int // input partitions whose stored next offset is their log end (or empty ones without)
}

// seqList renders the seq numbers of an input's rows, e.g. "seq 0, 0".
func seqList(rs []Row) string {
	if len(rs) == 0 {
		return "none"
	}
	return "seq " + shortList(rs, 6, func(r Row) string { return strconv.Itoa(r.Seq) })
}

// judgeRows judges the rows rs of input in by its mark: a NotJSON input
// must have none (poison-passed); a JSONBRefused input's rows must have a
// NULL value and value_bytes holding the payload, a NearLimit input's the
// jsonb value (misstored).
func judgeRows(rp reporter, table string, in Input, mark Mark, rs []Row) {
	for _, r := range rs {
		switch mark.Class {
		case NotJSON:
			rp.add(PoisonPassed, "%s, which must fail the chain, has row %s in %s", mark.of(in), r, table)
			return
		case JSONBRefused:
			switch {
			case r.JSON:
				rp.add(Misstored, "%s: row %s of %s has its value in the jsonb column, which refuses it; want value NULL and value_bytes", mark.of(in), r, table)
			case r.Bytes == nil:
				rp.add(Misstored, "%s: row %s of %s has neither value nor value_bytes", mark.of(in), r, table)
			case mark.Payload != nil && !bytes.Contains(r.Bytes, mark.Payload):
				rp.add(Misstored, "%s: the value_bytes of row %s of %s (%d bytes) do not hold the input's %q member (%d bytes)", mark.of(in), r, table, len(r.Bytes), PoisonField, len(mark.Payload))
			}
		case NearLimit:
			if !r.JSON {
				rp.add(Misstored, "%s: row %s of %s has no jsonb value (value_bytes %d bytes)", mark.of(in), r, table, len(r.Bytes))
			}
		}
	}
}
