// Package check is the model and the checker behind eoscheck: given the
// input records that exist, the output records with their lineage and
// transaction outcome, the consumer group's committed offsets and samples of
// partition ends over time, it counts the anomalies an exactly-once
// consume-transform-produce run must not show. The checker is pure (no Kafka
// I/O); read.go fills the model from a cluster.
package check

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String returns "topic/partition".
func (tp TopicPartition) String() string {
	return tp.Topic + "/" + strconv.Itoa(int(tp.Partition))
}

// Input is an input record that exists: a data record a read_committed
// reader of the input topic receives.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
}

// TP returns the input's partition.
func (in Input) TP() TopicPartition { return TopicPartition{in.Topic, in.Partition} }

// String returns "topic/partition@offset".
func (in Input) String() string {
	return in.Topic + "/" + strconv.Itoa(int(in.Partition)) + "@" + strconv.FormatInt(in.Offset, 10)
}

// Output is a data record in an output topic. Exactly one of Committed,
// Aborted and Pending is normally true; a record that is none of them had a
// commit marker but a read_committed reader did not receive it, and a
// record that is both Committed and Aborted is an aborted-read anomaly.
type Output struct {
	Topic     string
	Partition int32
	Offset    int64

	// Source is the input record the output was made from, taken from its
	// lineage headers. Source.Topic is empty when the headers are missing
	// or malformed.
	Source Input

	// Committed: a read_committed reader received the record.
	Committed bool
	// Aborted: the record belongs to a transaction that ended with an
	// abort marker (learnt from a read_uncommitted read with control
	// records).
	Aborted bool
	// Pending: the record's transaction had no marker yet when read, or
	// the record lay beyond the last stable offset: it is not visible yet.
	Pending bool

	// TxnEnd is the offset, in the output's partition, of the control
	// record that ended its transaction; -1 when unknown (open, or not
	// transactional). Two visible outputs of one input in one partition
	// with different TxnEnd were committed by two transactions.
	TxnEnd int64
}

// TP returns the output's partition.
func (o Output) TP() TopicPartition { return TopicPartition{o.Topic, o.Partition} }

// String returns "topic/partition@offset".
func (o Output) String() string {
	return Input{o.Topic, o.Partition, o.Offset}.String()
}

// DeadLetterRecord is a data record in a dead-letter topic: an input record the
// processor gave up on (PROCESSOR_ON_ERROR=dlq), written with the lineage
// headers of that input and the error that made it give up. The embedded
// Output holds its position, lineage (Source) and transaction outcome, read
// the same way as the outputs'.
type DeadLetterRecord struct {
	Output
	// Error is the record's processor.error header, cut to about
	// MaxErrorLen bytes; empty when the header is missing.
	Error string
}

// MaxErrorLen bounds the processor.error text kept per dead letter.
const MaxErrorLen = 200

// Sample is one observation of partition ends and group progress.
type Sample struct {
	At time.Time
	// Stable is the last stable offset (the read_committed end) of every
	// sampled partition, input and output.
	Stable map[TopicPartition]int64
	// High is the high watermark (the read_uncommitted end) of the same
	// partitions.
	High map[TopicPartition]int64
	// Committed is the group's committed offset of each input partition
	// that has one.
	Committed map[TopicPartition]int64
}

// Run is everything known about one processor run.
type Run struct {
	// Inputs are the input records that exist.
	Inputs []Input
	// Outputs are all data records of the output topics, visible or not.
	Outputs []Output
	// Committed is the group's committed offset (the next offset to read)
	// per input partition, read after the outputs' ends were taken. A
	// partition without a committed offset counts as committed at 0.
	Committed map[TopicPartition]int64
	// CommittedEarlier is the group's committed offsets read before the
	// outputs' ends were taken; nil means Committed. Against a live
	// processor the outputs are judged against the group progress that
	// brackets them: "lost" uses these, everything else Committed.
	CommittedEarlier map[TopicPartition]int64
	// InputEnds is the log-end offset (high watermark) of every input
	// partition, including empty ones.
	InputEnds map[TopicPartition]int64
	// Samples are observations over time, for hanging and stuck.
	Samples []Sample
	// DeadLetters are all data records of the dead-letter topics, visible
	// or not; empty when none were read. Every visible one is a
	// dead-letter anomaly, but for an input whose mark says it fails.
	DeadLetters []DeadLetterRecord
	// Marks are the fault drill's marks of the inputs that have one
	// (Source.Poison); nil or missing: Ordinary.
	Marks map[Input]Mark
}

// Options say what a correct run looks like.
type Options struct {
	// OneToOne: every input produces exactly one output (identity-like
	// transforms). Enables the duplicate count per input and lost. When
	// false (filters, flat-maps), duplicate means one input's outputs in
	// one output partition committed by two transactions, and lost is
	// not checked.
	OneToOne bool
	// ExpectAll: the group must have committed every input; inputs at or
	// past the committed offset are counted as uncommitted.
	ExpectAll bool
	// TransactionTimeout: a partition whose last stable offset stays
	// below its high watermark, without moving, for longer than this is
	// hanging. 0 disables the check.
	TransactionTimeout time.Duration
	// StuckAfter: an input partition with lag whose committed offset does
	// not move for longer than this is stuck. 0 disables the check.
	StuckAfter time.Duration
	// MaxExamples is how many examples are kept per anomaly; 0 means 5.
	MaxExamples int
	// AtLeastOnce audits a processor running at_least_once: an input
	// written more than once is expected (a crash or an abort repeats a
	// batch) and counted in Report.Repeated, not as a duplicate; every
	// other anomaly, lost above all, still counts.
	AtLeastOnce bool
	// Skipping: some instances ran PROCESSOR_ON_ERROR=skip, so an input
	// whose mark says it fails (NotJSON) may have neither output nor dead
	// letter: it is counted as skipped by policy (ClassTotals.Skipped),
	// not lost. Ordinary and other marked inputs are lost all the same.
	Skipping bool
}

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
var Anomalies = []Anomaly{Duplicate, Lost, AbortedRead, Order, OffsetMismatch, Uncommitted, Phantom, Hanging, Stuck, DeadLetter, PoisonPassed}

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
	Samples        int // samples taken
	Window         time.Duration

	// Database holds the totals of a run into PostgreSQL (CheckDatabase),
	// which the table shows in place of outputs and samples; nil for a
	// run into Kafka.
	Database *DatabaseTotals

	// Classes holds the totals of each marked class that has inputs;
	// nil when the run had no marks.
	Classes map[Class]*ClassTotals
}

// kinds returns the anomalies the check looked for, in report order, one
// table row each: DatabaseAnomalies for a run into PostgreSQL, else
// Anomalies; those about marked inputs (poison-passed, misstored) only
// when the run had marked inputs.
func (r Report) kinds() []Anomaly {
	kinds := Anomalies
	if r.Database != nil {
		kinds = DatabaseAnomalies
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
		fmt.Fprintf(w, "samples\t%d over %s\n", r.Samples, r.Window.Round(time.Millisecond))
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

// uniqueInputs returns inputs sorted, without repeats, and the set of
// them.
func uniqueInputs(inputs []Input) ([]Input, map[Input]bool) {
	inputs = slices.Clone(inputs)
	slices.SortFunc(inputs, cmpInput)
	inputs = slices.Compact(inputs)
	exists := make(map[Input]bool, len(inputs))
	for _, in := range inputs {
		exists[in] = true
	}
	return inputs, exists
}

func (rp reporter) add(a Anomaly, format string, args ...any) {
	rp.r.Counts[a]++
	if len(rp.r.Examples[a]) < rp.max {
		rp.r.Examples[a] = append(rp.r.Examples[a], fmt.Sprintf(format, args...))
	}
}

// committedAt returns the committed offset of tp, 0 when there is none.
func committedAt(m map[TopicPartition]int64, tp TopicPartition) int64 {
	if c, ok := m[tp]; ok && c > 0 {
		return c
	}
	return 0
}

// Check audits a run and counts its anomalies.
func Check(run Run, opts Options) Report {
	rep, rp := newReport(Anomalies, opts.MaxExamples)
	committed := run.Committed
	earlier := run.CommittedEarlier
	if earlier == nil {
		earlier = committed
	}

	inputs, exists := uniqueInputs(run.Inputs)
	rep.Inputs = len(inputs)
	byTP := map[TopicPartition][]int64{} // sorted offsets per input partition
	for _, in := range inputs {
		byTP[in.TP()] = append(byTP[in.TP()], in.Offset)
	}

	outputs := slices.Clone(run.Outputs)
	slices.SortFunc(outputs, func(a, b Output) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	visible := map[Input][]Output{} // existing input -> its visible outputs
	pending := map[Input]bool{}
	for _, o := range outputs {
		switch {
		case o.Committed:
			rep.OutputsVisible++
		case o.Pending:
			rep.OutputsPending++
		}
		if o.Aborted {
			rep.OutputsAborted++
		}
		if o.Pending && !o.Committed {
			pending[o.Source] = true
		}
		if !o.Committed {
			continue
		}
		if o.Aborted {
			// Counted once, here; the other checks judge what a
			// correct read_committed reader would have seen.
			rp.add(AbortedRead, "%s (from %s) is visible to read_committed but its transaction aborted (marker at %d)", o, o.Source, o.TxnEnd)
			continue
		}
		switch {
		case o.Source.Topic == "":
			rp.add(Phantom, "%s has no valid lineage headers", o)
			continue
		case !exists[o.Source]:
			rp.add(Phantom, "%s claims source %s, which is not an input record", o, o.Source)
			continue
		}
		visible[o.Source] = append(visible[o.Source], o)
	}

	// Dead letters: every visible one is an anomaly. One with valid
	// lineage also accounts for its input below: that input is not lost,
	// and any other visible output or dead letter of it is a duplicate.
	dead := map[Input][]Output{} // existing input -> its visible dead letters
	dls := slices.Clone(run.DeadLetters)
	slices.SortFunc(dls, func(a, b DeadLetterRecord) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	for _, d := range dls {
		if d.Pending && !d.Committed {
			pending[d.Source] = true
		}
		if !d.Committed {
			continue
		}
		msg := strconv.Quote(TruncateError(d.Error))
		if d.Error == "" {
			msg = "missing"
		}
		switch {
		case exists[d.Source] && run.Marks[d.Source].Class.Fails():
			// The dead letter its class must become.
		case d.Source.Topic == "":
			rp.add(DeadLetter, "%s is a dead letter without valid %s headers, %s %s", d.Output, lineageHeaders, HeaderError, msg)
		case !exists[d.Source]:
			rp.add(DeadLetter, "%s is a dead letter claiming source %s, which is not an input record, %s %s", d.Output, d.Source, HeaderError, msg)
		default:
			rp.add(DeadLetter, "%s is a dead letter of %s, %s %s", d.Output, d.Source, HeaderError, msg)
		}
		if d.Aborted {
			rp.add(AbortedRead, "%s (dead letter of %s) is visible to read_committed but its transaction aborted (marker at %d)", d.Output, d.Source, d.TxnEnd)
			continue
		}
		if exists[d.Source] {
			dead[d.Source] = append(dead[d.Source], d.Output)
		}
	}

	// Duplicates, per input.
	for _, in := range inputs {
		outs, dl := visible[in], dead[in]
		twice := len(dl) > 1 || len(dl) == 1 && len(outs) > 0 // a dead letter and another dead letter or output
		if opts.AtLeastOnce {
			if twice || opts.OneToOne && len(outs) > 1 {
				rep.Repeated++
			}
			continue
		}
		if twice {
			rp.add(Duplicate, "%s has %d visible outputs and %d dead letters: %s", in, len(outs), len(dl), outputList(slices.Concat(outs, dl)))
			continue
		}
		if opts.OneToOne {
			if len(outs) > 1 {
				rp.add(Duplicate, "%s has %d visible outputs: %s", in, len(outs), outputList(outs))
			}
			continue
		}
		// Flat-map: one attempt writes all its outputs in one
		// transaction, so one partition holding outputs of this input
		// from two transactions means it was committed twice.
		txns := map[TopicPartition]int64{}
		for _, o := range outs {
			if o.TxnEnd < 0 {
				continue
			}
			if t, ok := txns[o.TP()]; ok && t != o.TxnEnd {
				rp.add(Duplicate, "%s has outputs in %s from two transactions (markers at %d and %d): %s", in, o.TP(), t, o.TxnEnd, outputList(outs))
				break
			}
			txns[o.TP()] = o.TxnEnd
		}
	}

	// Lost (or skipped by policy), uncommitted and torn transactions, and
	// what became of the marked inputs, per input.
	totals := classTotals(run.Marks)
	for _, in := range inputs {
		tp := in.TP()
		c := committedAt(committed, tp)
		done := slices.Concat(visible[in], dead[in])
		mark := run.Marks[in]
		skipped := false
		if opts.OneToOne && len(done) == 0 && !pending[in] && in.Offset < committedAt(earlier, tp) {
			switch {
			case mark.Class.Fails() && opts.Skipping:
				skipped = true
			case mark.Class.Fails():
				rp.add(Lost, "%s is below the committed offset %d but has no visible dead letter (lost or skipped)", mark.of(in), committedAt(earlier, tp))
			default:
				rp.add(Lost, "%s is below the committed offset %d but has no visible output (lost or skipped)", mark.of(in), committedAt(earlier, tp))
			}
		}
		if mark.Class.Fails() && len(visible[in]) > 0 {
			rp.add(PoisonPassed, "%s, which must fail the chain, has visible output %s", mark.of(in), outputList(visible[in]))
		}
		countClass(totals, mark.Class, len(visible[in]) > 0, len(dead[in]) > 0, skipped)
		if in.Offset >= c {
			if len(done) > 0 {
				rp.add(OffsetMismatch, "%s has visible output %s but the group's committed offset is %d", in, done[0], c)
			} else if opts.ExpectAll {
				rp.add(Uncommitted, "%s is at or past the committed offset %d", in, c)
			}
		}
	}
	// Committed offsets beyond the log.
	for _, tp := range sortedKeys(committed) {
		end, ok := run.InputEnds[tp]
		if ok && committed[tp] > end {
			rp.add(OffsetMismatch, "%s: committed offset %d is beyond the log end %d", tp, committed[tp], end)
		}
	}

	// Order: per input partition, within each output partition, sources
	// must come in input order (the first visible occurrence of each).
	type key struct{ src, out TopicPartition }
	last := map[key]int64{}
	seen := map[key]map[int64]bool{}
	for _, o := range outputs {
		if !o.Committed || o.Aborted || !exists[o.Source] {
			continue
		}
		k := key{o.Source.TP(), o.TP()}
		if seen[k] == nil {
			seen[k] = map[int64]bool{}
		}
		if seen[k][o.Source.Offset] {
			continue
		}
		seen[k][o.Source.Offset] = true
		if prev, ok := last[k]; ok && o.Source.Offset < prev {
			rp.add(Order, "%s (from %s) follows an output of %s@%d", o, o.Source, o.Source.TP(), prev)
		}
		last[k] = o.Source.Offset
	}

	rep.Classes = totals

	samples := slices.Clone(run.Samples)
	slices.SortStableFunc(samples, func(a, b Sample) int { return a.At.Compare(b.At) })
	rep.Samples = len(samples)
	if len(samples) > 1 {
		rep.Window = samples[len(samples)-1].At.Sub(samples[0].At)
	}
	checkHanging(rp, samples, opts.TransactionTimeout)
	checkStuck(rp, samples, inputPartitions(run), byTP, opts.StuckAfter)
	return *rep
}

// checkHanging flags partitions whose last stable offset stayed at one
// offset below the high watermark for longer than timeout: the transaction
// starting there has been open that long.
func checkHanging(rp reporter, samples []Sample, timeout time.Duration) {
	if timeout <= 0 || len(samples) < 2 {
		return
	}
	tps := map[TopicPartition]bool{}
	for _, s := range samples {
		for tp := range s.Stable {
			tps[tp] = true
		}
	}
	for _, tp := range sortedKeys(tps) {
		var start time.Time
		lso, open := int64(-1), false
		var worst time.Duration
		var worstLSO, worstHWM int64
		for _, s := range samples {
			st, ok1 := s.Stable[tp]
			hw, ok2 := s.High[tp]
			if !ok1 || !ok2 || st >= hw {
				open = false
				continue
			}
			if !open || st != lso {
				open, start, lso = true, s.At, st
			}
			if d := s.At.Sub(start); d > worst {
				worst, worstLSO, worstHWM = d, st, hw
			}
		}
		if worst > timeout {
			rp.add(Hanging, "%s: last stable offset stayed at %d below the high watermark %d for %s (transaction timeout %s)",
				tp, worstLSO, worstHWM, worst.Round(time.Millisecond), timeout)
		}
	}
}

// checkStuck flags input partitions that had records to read past the
// committed offset while the committed offset did not move for longer than
// after. Offsets holding only transaction markers or aborted records are not
// lag: a caught-up group on a transactional input sits below the end.
func checkStuck(rp reporter, samples []Sample, tps []TopicPartition, inputs map[TopicPartition][]int64, after time.Duration) {
	if after <= 0 || len(samples) < 2 {
		return
	}
	for _, tp := range tps {
		offs := inputs[tp]
		var start time.Time
		at, lagging := int64(-1), false
		var worst time.Duration
		var worstAt, worstEnd int64
		for _, s := range samples {
			end, ok := s.Stable[tp]
			c := committedAt(s.Committed, tp)
			i, _ := slices.BinarySearch(offs, c)
			if !ok || i >= len(offs) || offs[i] >= end {
				lagging = false
				continue
			}
			if !lagging || c != at {
				lagging, start, at = true, s.At, c
			}
			if d := s.At.Sub(start); d > worst {
				worst, worstAt, worstEnd = d, c, end
			}
		}
		if worst > after {
			rp.add(Stuck, "%s: committed offset stayed at %d with records up to %d to read for %s (threshold %s)",
				tp, worstAt, worstEnd, worst.Round(time.Millisecond), after)
		}
	}
}

// inputPartitions returns every input partition the run knows of, sorted.
func inputPartitions(run Run) []TopicPartition {
	tps := map[TopicPartition]bool{}
	for tp := range run.InputEnds {
		tps[tp] = true
	}
	for tp := range run.Committed {
		tps[tp] = true
	}
	for _, in := range run.Inputs {
		tps[in.TP()] = true
	}
	return sortedKeys(tps)
}

func cmpInput(a, b Input) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}

func cmpTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func sortedKeys[V any](m map[TopicPartition]V) []TopicPartition {
	ks := make([]TopicPartition, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, cmpTP)
	return ks
}

// lineageHeaders names the three lineage headers in examples.
var lineageHeaders = strings.TrimSuffix(HeaderSourceTopic, "topic") + "*"

// TruncateError cuts a processor.error text to about MaxErrorLen bytes, at
// a UTF-8 boundary, marking the cut with "...".
func TruncateError(s string) string {
	if len(s) <= MaxErrorLen {
		return s
	}
	cut := MaxErrorLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
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
