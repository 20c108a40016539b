package check

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Anomaly names one kind of violation.
type Anomaly string

// The anomalies, in the order the report lists them.
const (
	// Duplicate: an input whose output a read_committed reader sees more
	// than once.
	Duplicate Anomaly = "duplicate"
	// Lost: an input the group has committed past whose output a
	// read_committed reader never sees.
	Lost Anomaly = "lost"
	// AbortedRead: a read_committed reader received a record of an
	// aborted transaction.
	AbortedRead Anomaly = "aborted-read"
	// Order: outputs of one input partition appear out of input order
	// within an output partition.
	Order Anomaly = "order"
	// KeyOrder: outputs of one key appear out of input order within an
	// output partition (per input partition), or one key's outputs of one
	// input partition are in two partitions of an output topic, where their
	// order cannot be judged: the processor keeps the key, and the
	// producer partitions by it. Null keys are not judged.
	KeyOrder Anomaly = "key-order"
	// OffsetMismatch: outputs visible for inputs the group has not
	// committed (a torn transaction), or a committed offset beyond the
	// input's log end.
	OffsetMismatch Anomaly = "offset-mismatch"
	// Uncommitted: inputs at or past the group's committed offset when
	// the run should have processed everything.
	Uncommitted Anomaly = "uncommitted"
	// Phantom: a visible output whose lineage is missing or points at no
	// existing input record.
	Phantom Anomaly = "phantom"
	// Hanging: a transaction open longer than the transaction timeout.
	Hanging Anomaly = "hanging"
	// Stuck: an input partition with lag whose committed offset did not
	// move for longer than the stuck threshold.
	Stuck Anomaly = "stuck"
	// DeadLetter: a dead letter a read_committed reader of a
	// dead-letter topic sees, of an input whose mark does not say it
	// fails (Class.Fails): a good record the processor gave up on. The
	// audited run's only bad records are its marked ones (as in the fault
	// drill); without marks, every dead letter counts.
	DeadLetter Anomaly = "dead-letter"
	// PoisonPassed: an input whose mark says it fails the chain (NotJSON)
	// has a visible output or a row instead of a dead letter.
	PoisonPassed Anomaly = "poison-passed"
	// Misstored (PostgreSQL only): the row of a marked input is not
	// stored as its class needs: a JSONBRefused input's row with a value
	// in the jsonb column, or without value_bytes holding its payload; a
	// NearLimit input's row without the jsonb value.
	Misstored Anomaly = "misstored"
)

// Anomalies lists every anomaly in report order.
var Anomalies = []Anomaly{Duplicate, Lost, AbortedRead, Order, KeyOrder, OffsetMismatch, Uncommitted, Phantom, Hanging, Stuck, DeadLetter, PoisonPassed}

// Report is the checker's verdict.
type Report struct {
	// Counts holds the number of occurrences per anomaly (see each
	// anomaly's doc for what one occurrence is).
	Counts map[Anomaly]int
	// Examples holds up to Options.MaxExamples human-readable examples
	// per anomaly.
	Examples map[Anomaly][]string

	Inputs         int // input records
	OutputsVisible int // output records a read_committed reader received
	OutputsAborted int // output records of aborted transactions
	OutputsPending int // output records not visible yet (open transaction)
	Repeated       int // inputs written more than once, under Options.AtLeastOnce
	Replayed       int // dead letters a replay has run again (Run.Replayed)
	Samples        int // samples taken
	Window         time.Duration

	// Database holds the totals of a run into PostgreSQL (CheckDatabase),
	// which the table shows in place of outputs and samples; nil for a
	// run into Kafka.
	Database *DatabaseTotals

	// Classes holds the totals of each marked class that has inputs;
	// nil when the run had no marks.
	Classes map[Class]*ClassTotals

	// Aggregate holds the totals of the aggregate check
	// (Options.Aggregate); nil when it did not run.
	Aggregate *AggregateTotals
	// Windows holds the totals of the windows check (Options.Windows);
	// nil when it did not run.
	Windows *WindowTotals
	// Dedupe holds the totals of the dedupe check (Options.Dedupe); nil
	// when it did not run.
	Dedupe *DedupeTotals
	// Join holds the totals of the join check (Options.Join); nil when
	// it did not run.
	Join *JoinTotals
}

// kinds returns the anomalies the check looked for, in report order, one
// table row each: DatabaseAnomalies for a run into PostgreSQL, else
// Anomalies; those about marked inputs (poison-passed, misstored) only
// when the run had marked inputs; then AggregateAnomalies when the
// aggregate check ran.
func (r Report) kinds() []Anomaly {
	kinds := Anomalies
	if r.Database != nil {
		kinds = DatabaseAnomalies
	}
	if r.Aggregate != nil {
		kinds = slices.Concat(kinds, AggregateAnomalies)
	}
	if r.Windows != nil {
		kinds = slices.Concat(kinds, WindowAnomalies)
	}
	if r.Dedupe != nil {
		kinds = slices.Concat(kinds, DedupeAnomalies)
	}
	if r.Join != nil {
		kinds = slices.Concat(kinds, JoinAnomalies)
	}
	if r.Classes == nil {
		kinds = slices.DeleteFunc(slices.Clone(kinds), func(a Anomaly) bool { return a == PoisonPassed || a == Misstored })
	}
	return kinds
}

// Clean reports whether no anomaly was found.
func (r Report) Clean() bool {
	for _, n := range r.Counts {
		if n > 0 {
			return false
		}
	}
	return true
}

// Anomalies returns the total number of anomalies found.
func (r Report) Anomalies() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

// Table renders the report: one row per anomaly checked (kinds) in fixed
// order with its count and first example (with how many more there are),
// then the totals (of outputs, or of rows for a run into PostgreSQL) and a
// last line "result: CLEAN" or "result: N ANOMALIES (...)".
func (r Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ANOMALY\tCOUNT\tEXAMPLE")
	for _, a := range r.kinds() {
		ex := "-"
		if es := r.Examples[a]; len(es) > 0 {
			ex = es[0]
			if more := r.Counts[a] - 1; more > 0 {
				ex += fmt.Sprintf(" (+%d more)", more)
			}
		}
		fmt.Fprintf(w, "%s\t%d\t%s\n", a, r.Counts[a], ex)
	}
	fmt.Fprintf(w, "inputs\t%d\n", r.Inputs)
	if db := r.Database; db != nil {
		fmt.Fprintf(w, "outputs (rows)\t%d in %s\n", db.Rows, db.Table)
		if db.DeadLetterTable != "" {
			fmt.Fprintf(w, "dead letters\t%d in %s\n", db.DeadLetters, db.DeadLetterTable)
		}
		fmt.Fprintf(w, "offsets stored\t%d of %d input partitions, %d at the log end\n", db.Stored, db.Partitions, db.AtEnd)
	} else {
		fmt.Fprintf(w, "outputs visible\t%d\n", r.OutputsVisible)
		fmt.Fprintf(w, "outputs aborted\t%d\n", r.OutputsAborted)
		fmt.Fprintf(w, "outputs pending\t%d\n", r.OutputsPending)
		if r.Repeated > 0 {
			fmt.Fprintf(w, "inputs repeated\t%d (written more than once, expected at least once)\n", r.Repeated)
		}
		if r.Replayed > 0 {
			fmt.Fprintf(w, "dead letters replayed\t%d (read by the replay group, not counted)\n", r.Replayed)
		}
		fmt.Fprintf(w, "samples\t%d over %s\n", r.Samples, r.Window.Round(time.Millisecond))
	}
	if ag := r.Aggregate; ag != nil {
		if ag.GroupBy != "" {
			fmt.Fprintf(w, "aggregate counts\t%d groups by %s, last counts summing to %d, the highest %d\n", ag.Keys, ag.GroupBy, ag.Final, ag.Max)
		} else {
			fmt.Fprintf(w, "aggregate counts\t%d keys, last counts summing to %d, the highest %d\n", ag.Keys, ag.Final, ag.Max)
		}
	}
	if wt := r.Windows; wt != nil {
		fmt.Fprintf(w, "windows\t%s\n", wt)
	}
	if dt := r.Dedupe; dt != nil {
		fmt.Fprintf(w, "dedupe\t%s\n", dt)
	}
	if jt := r.Join; jt != nil {
		fmt.Fprintf(w, "join\t%s\n", jt)
	}
	outputs := "outputs"
	if r.Database != nil {
		outputs = "rows"
	}
	for _, c := range Classes {
		if ct := r.Classes[c]; ct != nil {
			fmt.Fprintf(w, "poison %s\t%d inputs: %d %s, %d dead letters, %d skipped by policy\n", c, ct.Inputs, ct.Outputs, outputs, ct.DeadLetters, ct.Skipped)
		}
	}
	_ = w.Flush()
	if r.Clean() {
		b.WriteString("result: CLEAN\n")
		return b.String()
	}
	var parts []string
	for _, a := range r.kinds() {
		if r.Counts[a] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, r.Counts[a]))
		}
	}
	fmt.Fprintf(&b, "result: %d ANOMALIES (%s)\n", r.Anomalies(), strings.Join(parts, ", "))
	return b.String()
}

type reporter struct {
	r   *Report
	max int
}

// newReport returns a report with a zero count of each of kinds, and the
// reporter that fills it, keeping maxExamples examples per anomaly (5
// when 0).
func newReport(kinds []Anomaly, maxExamples int) (*Report, reporter) {
	if maxExamples <= 0 {
		maxExamples = 5
	}
	rep := &Report{Counts: map[Anomaly]int{}, Examples: map[Anomaly][]string{}}
	for _, a := range kinds {
		rep.Counts[a] = 0
	}
	return rep, reporter{rep, maxExamples}
}

func (rp reporter) add(a Anomaly, format string, args ...any) {
	rp.r.Counts[a]++
	if len(rp.r.Examples[a]) < rp.max {
		rp.r.Examples[a] = append(rp.r.Examples[a], fmt.Sprintf(format, args...))
	}
}

func outputList(outs []Output) string { return shortList(outs, 4, Output.String) }

// shortList renders the first max of xs with str, comma-separated, and
// how many more there are as +N.
func shortList[T any](xs []T, max int, str func(T) string) string {
	parts := make([]string, 0, min(len(xs), max+1))
	for i, x := range xs {
		if i == max {
			parts = append(parts, fmt.Sprintf("+%d", len(xs)-max))
			break
		}
		parts = append(parts, str(x))
	}
	return strings.Join(parts, ", ")
}
