package check

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/streamproc/processor/record"
)

// audit is one run of Check: the run and its options, the report it fills,
// and what the passes over the outputs and dead letters learn for the
// passes over the inputs.
type audit struct {
	run  Run
	opts Options
	rep  *Report
	rp   reporter

	inputs  []Input                           // sorted, without repeats
	exists  map[Input]bool                    // the set of inputs
	byTP    map[record.TopicPartition][]int64 // sorted offsets per input partition
	outputs []Output                          // sorted by position
	visible map[Input][]Output                // existing input -> its visible outputs
	dead    map[Input][]Output                // existing input -> its visible dead letters
	pending map[Input]bool                    // inputs with an output or dead letter not visible yet
	skipped map[Input]bool                    // inputs skipped by policy (Options.Skipping)
	// replayed are the inputs with a dead letter a replay ran again
	// (Run.Replayed): their outputs come after later inputs', out of
	// input order by design, and the order checks pass them over.
	replayed map[Input]bool
}

// Check audits a run and counts its anomalies.
func Check(run Run, opts Options) Report {
	kinds := Anomalies
	if opts.Aggregate {
		kinds = slices.Concat(Anomalies, AggregateAnomalies)
	}
	if opts.Windows != nil {
		kinds = slices.Concat(kinds, WindowAnomalies)
	}
	if opts.Dedupe != nil {
		kinds = slices.Concat(kinds, DedupeAnomalies)
	}
	if opts.Join != nil {
		kinds = slices.Concat(kinds, JoinAnomalies)
	}
	rep, rp := newReport(kinds, opts.MaxExamples)
	a := &audit{run: run, opts: opts, rep: rep, rp: rp,
		byTP: map[record.TopicPartition][]int64{}, visible: map[Input][]Output{}, dead: map[Input][]Output{}, pending: map[Input]bool{},
		skipped: map[Input]bool{}, replayed: map[Input]bool{}}
	a.inputs, a.exists = uniqueInputs(run.Inputs)
	rep.Inputs = len(a.inputs)
	for _, in := range a.inputs {
		a.byTP[in.TP()] = append(a.byTP[in.TP()], in.Offset)
	}
	a.checkOutputs()
	a.checkDeadLetters()
	a.checkDuplicates()
	a.checkProgress()
	if len(opts.GroupBy) == 0 {
		// Through a repartition hop only each group's order is kept
		// (key-order judges it), not the order of an input partition's
		// records across groups.
		a.checkOrder()
	}
	a.checkKeyOrder()
	a.checkSamples()
	if opts.Aggregate {
		a.checkAggregate()
	}
	if opts.Windows != nil {
		a.checkWindows()
	}
	if opts.Dedupe != nil {
		a.checkDedupe()
	}
	if opts.Join != nil {
		a.checkJoin()
	}
	return *rep
}

// byPosition orders outputs by topic, partition and offset.
func byPosition(a, b Output) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}

// checkOutputs counts the outputs by visibility and notes the visible ones
// of existing inputs; a visible output of an aborted transaction is an
// aborted read, one without valid lineage or of no input a phantom.
func (a *audit) checkOutputs() {
	a.outputs = slices.Clone(a.run.Outputs)
	slices.SortFunc(a.outputs, byPosition)
	for _, o := range a.outputs {
		switch {
		case o.Committed:
			a.rep.OutputsVisible++
		case o.Pending:
			a.rep.OutputsPending++
		}
		if o.Aborted {
			a.rep.OutputsAborted++
		}
		if o.Pending && !o.Committed {
			a.pending[o.Source] = true
		}
		if !o.Committed {
			continue
		}
		if o.Aborted {
			// Counted once, here; the other checks judge what a
			// correct read_committed reader would have seen.
			a.rp.add(AbortedRead, "%s (from %s) is visible to read_committed but its transaction aborted (marker at %d)", o, o.Source, o.TxnEnd)
			continue
		}
		switch {
		case o.Source.Topic == "":
			a.rp.add(Phantom, "%s has no valid lineage headers", o)
			continue
		case !a.exists[o.Source]:
			a.rp.add(Phantom, "%s claims source %s, which is not an input record", o, o.Source)
			continue
		}
		a.visible[o.Source] = append(a.visible[o.Source], o)
	}
}

// checkDeadLetters: every visible dead letter is an anomaly, but of an
// input whose mark says it fails. One with valid lineage also accounts for
// its input: that input is not lost, and any other visible output or dead
// letter of it is a duplicate.
func (a *audit) checkDeadLetters() {
	dls := slices.Clone(a.run.DeadLetters)
	slices.SortFunc(dls, func(x, y DeadLetterRecord) int { return byPosition(x.Output, y.Output) })
	for _, d := range dls {
		if d.Pending && !d.Committed {
			a.pending[d.Source] = true
		}
		if !d.Committed {
			continue
		}
		if at, ok := a.run.Replayed[d.TP()]; ok && d.Offset < at {
			a.rep.Replayed++ // run again by a replay: its input is judged by its outputs
			a.replayed[d.Source] = true
			continue
		}
		msg := strconv.Quote(TruncateError(d.Error))
		if d.Error == "" {
			msg = "missing"
		}
		switch {
		case a.exists[d.Source] && a.run.Marks[d.Source].Class.Fails():
			// The dead letter its class must become.
		case d.Source.Topic == "":
			a.rp.add(DeadLetter, "%s is a dead letter without valid %s headers, %s %s", d.Output, lineageHeaders, record.HeaderError, msg)
		case !a.exists[d.Source]:
			a.rp.add(DeadLetter, "%s is a dead letter claiming source %s, which is not an input record, %s %s", d.Output, d.Source, record.HeaderError, msg)
		default:
			a.rp.add(DeadLetter, "%s is a dead letter of %s, %s %s", d.Output, d.Source, record.HeaderError, msg)
		}
		if d.Aborted {
			a.rp.add(AbortedRead, "%s (dead letter of %s) is visible to read_committed but its transaction aborted (marker at %d)", d.Output, d.Source, d.TxnEnd)
			continue
		}
		if a.exists[d.Source] {
			a.dead[d.Source] = append(a.dead[d.Source], d.Output)
		}
	}
}

// checkDuplicates counts, per input, outputs and dead letters seen more
// than once (or, under Options.AtLeastOnce, the inputs repeated).
func (a *audit) checkDuplicates() {
	for _, in := range a.inputs {
		outs, dl := a.visible[in], a.dead[in]
		twice := len(dl) > 1 || len(dl) == 1 && len(outs) > 0 // a dead letter and another dead letter or output
		if a.opts.AtLeastOnce {
			if twice || a.opts.OneToOne && len(outs) > 1 {
				a.rep.Repeated++
			}
			continue
		}
		if twice {
			a.rp.add(Duplicate, "%s has %d visible outputs and %d dead letters: %s", in, len(outs), len(dl), outputList(slices.Concat(outs, dl)))
			continue
		}
		if a.opts.OneToOne {
			if len(outs) > 1 {
				a.rp.add(Duplicate, "%s has %d visible outputs: %s", in, len(outs), outputList(outs))
			}
			continue
		}
		a.checkFlatMapDuplicate(in, outs)
	}
}

// checkFlatMapDuplicate: one attempt writes all its outputs in one
// transaction, so one partition holding outputs of in from two
// transactions means it was committed twice.
func (a *audit) checkFlatMapDuplicate(in Input, outs []Output) {
	txns := map[record.TopicPartition]int64{}
	for _, o := range outs {
		if o.TxnEnd < 0 {
			continue
		}
		if t, ok := txns[o.TP()]; ok && t != o.TxnEnd {
			a.rp.add(Duplicate, "%s has outputs in %s from two transactions (markers at %d and %d): %s", in, o.TP(), t, o.TxnEnd, outputList(outs))
			return
		}
		txns[o.TP()] = o.TxnEnd
	}
}

// checkProgress judges, per input, lost (or skipped by policy),
// uncommitted and torn transactions, and what became of the marked inputs;
// then the committed offsets beyond the log.
func (a *audit) checkProgress() {
	committed, earlier := a.run.Committed, a.run.CommittedEarlier
	if earlier == nil {
		earlier = committed
	}
	totals := classTotals(a.run.Marks)
	for _, in := range a.inputs {
		tp := in.TP()
		c := committedAt(committed, tp)
		done := slices.Concat(a.visible[in], a.dead[in])
		mark := a.run.Marks[in]
		skipped := false
		if a.opts.OneToOne && len(done) == 0 && !a.pending[in] && in.Offset < committedAt(earlier, tp) {
			switch {
			case mark.Class.Fails() && a.opts.Skipping:
				skipped = true
				a.skipped[in] = true
			case mark.Class.Fails():
				a.rp.add(Lost, "%s is below the committed offset %d but has no visible dead letter (lost or skipped)", mark.of(in), committedAt(earlier, tp))
			default:
				a.rp.add(Lost, "%s is below the committed offset %d but has no visible output (lost or skipped)", mark.of(in), committedAt(earlier, tp))
			}
		}
		if mark.Class.Fails() && len(a.visible[in]) > 0 {
			a.rp.add(PoisonPassed, "%s, which must fail the chain, has visible output %s", mark.of(in), outputList(a.visible[in]))
		}
		countClass(totals, mark.Class, len(a.visible[in]) > 0, len(a.dead[in]) > 0, skipped)
		if in.Offset >= c {
			if len(done) > 0 {
				a.rp.add(OffsetMismatch, "%s has visible output %s but the group's committed offset is %d", in, done[0], c)
			} else if a.opts.ExpectAll {
				a.rp.add(Uncommitted, "%s is at or past the committed offset %d", in, c)
			}
		}
	}
	a.rep.Classes = totals
	for _, tp := range sortedKeys(committed) {
		end, ok := a.run.InputEnds[tp]
		if ok && committed[tp] > end {
			a.rp.add(OffsetMismatch, "%s: committed offset %d is beyond the log end %d", tp, committed[tp], end)
		}
	}
}

// checkOrder: per input partition, within each output partition, sources
// must come in input order (the first visible occurrence of each); with
// Options.Windows only in the late topic: final rows come as windows close,
// each with the lineage of its last input.
func (a *audit) checkOrder() {
	type key struct{ src, out record.TopicPartition }
	last := map[key]int64{}
	seen := map[key]map[int64]bool{}
	for _, o := range a.outputs {
		if !o.Committed || o.Aborted || !a.exists[o.Source] || a.replayed[o.Source] {
			continue
		}
		if w := a.opts.Windows; w != nil && o.Topic != w.LateTopic {
			continue // final rows come in the order windows close
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
			a.rp.add(Order, "%s (from %s) follows an output of %s@%d", o, o.Source, o.Source.TP(), prev)
		}
		last[k] = o.Source.Offset
	}
}

// checkKeyOrder: per key, within each output partition, the sources of
// one input partition must come in input order (the first visible
// occurrence of each), which PROCESSOR_ORDERING=key promises whatever the
// order of other keys; and a key's outputs of one input partition must all
// be in one partition of an output topic (the processor keeps the key and
// the producer partitions by it), or their order could not be judged.
func (a *audit) checkKeyOrder() {
	type group struct {
		key      string
		src, out record.TopicPartition
	}
	type topicKey struct {
		topic, key string
		src        record.TopicPartition
	}
	last := map[group]int64{}
	seen := map[group]map[int64]bool{}
	home := map[topicKey]int32{}
	for _, o := range a.outputs {
		if !o.Committed || o.Aborted || !a.exists[o.Source] || !o.Keyed || a.replayed[o.Source] {
			continue
		}
		tk := topicKey{o.Topic, o.Key, o.Source.TP()}
		if p, ok := home[tk]; !ok {
			home[tk] = o.Partition
		} else if p != o.Partition {
			a.rp.add(KeyOrder, "%s (from %s) has key %q, whose earlier outputs of %s are in %s/%d", o, o.Source, o.Key, o.Source.TP(), o.Topic, p)
			continue
		}
		g := group{o.Key, o.Source.TP(), o.TP()}
		if seen[g] == nil {
			seen[g] = map[int64]bool{}
		}
		if seen[g][o.Source.Offset] {
			continue
		}
		seen[g][o.Source.Offset] = true
		if prev, ok := last[g]; ok && o.Source.Offset < prev {
			a.rp.add(KeyOrder, "%s (from %s) follows an output of key %q from %s@%d", o, o.Source, o.Key, o.Source.TP(), prev)
		}
		last[g] = o.Source.Offset
	}
}

// checkSamples judges the samples over time: hanging and stuck.
func (a *audit) checkSamples() {
	samples := slices.Clone(a.run.Samples)
	slices.SortStableFunc(samples, func(x, y Sample) int { return x.At.Compare(y.At) })
	a.rep.Samples = len(samples)
	if len(samples) > 1 {
		a.rep.Window = samples[len(samples)-1].At.Sub(samples[0].At)
	}
	checkHanging(a.rp, samples, a.opts.TransactionTimeout)
	checkStuck(a.rp, samples, inputPartitions(a.run), a.byTP, a.opts.StuckAfter)
}
