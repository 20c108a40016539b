package check

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/streamproc/processor/record"
)

// A run of the dedupe transform (BY a member of the value, WINDOW,
// GRACE) passes a record unless a record of the same id was first seen
// less than WINDOW before it, by record timestamp; a record more than
// GRACE behind its partition's stream time (the largest input timestamp
// so far, in offset order) is late: it passes to the late topic (with
// Dedupe.LateTopic), or on to the output without one. Options.Dedupe
// asks for this check (eoscheck -check dedupe); the reader then keeps
// each input's id (Source.GroupBy: the BY path) and timestamp. The check
// replays the inputs the processor took, in offset order per partition,
// through a reference model of the dedupe: every first sighting of an
// id within its window must have exactly one committed output, every
// duplicate none, every late input must be in the late topic once (or
// pass, without one). Inputs without an id, dead-lettered, skipped or
// marked to fail move the stream time and are judged by the other
// checks only.

// The anomalies of the dedupe check, in report order (and LateWrong).
const (
	// DedupePassed: an input the model finds a duplicate (its id seen
	// within the window before it) with a committed output.
	DedupePassed Anomaly = "dedupe-passed"
	// DedupeMissing: an input the model passes (a first sighting, or
	// late without a late topic) without exactly one committed output.
	DedupeMissing Anomaly = "dedupe-missing"
)

// DedupeAnomalies lists the dedupe check's anomalies in report order.
var DedupeAnomalies = []Anomaly{DedupePassed, DedupeMissing, LateWrong}

// Dedupe are the settings of the dedupe the check judges.
type Dedupe struct {
	Window, Grace time.Duration
	// LateTopic is PROCESSOR_LATE_TOPIC, one of the output topics read;
	// empty: late inputs passed to the output.
	LateTopic string
}

// DedupeTotals sum up the dedupe check.
type DedupeTotals struct {
	IDs        int // distinct ids among the inputs judged
	Passed     int // inputs the model passes (first sightings within a window)
	Duplicates int // inputs the model filters
	Late       int // inputs the model finds late
}

// String renders the totals for the report.
func (t DedupeTotals) String() string {
	return fmt.Sprintf("%d ids, %d inputs passed, %d duplicates filtered, %d inputs late", t.IDs, t.Passed, t.Duplicates, t.Late)
}

// dedupeVerdict is the model's outcome of one input.
type dedupeVerdict int

const (
	dedupeFirst dedupeVerdict = iota // passes: the id's first sighting within a window
	dedupeDup                        // filtered: seen within the window before
	dedupeLate                       // late: to the late topic, or passes without one
)

// dedupeModel replays the taken inputs that have an id, as the dedupe
// transform judges them, and returns each one's verdict and the number
// of distinct ids.
func (a *audit) dedupeModel(d Dedupe) (map[Input]dedupeVerdict, int) {
	window, grace := d.Window.Milliseconds(), d.Grace.Milliseconds()
	verdicts := map[Input]dedupeVerdict{}
	stream := map[record.TopicPartition]int64{}
	seen := map[string]int64{} // id -> the timestamp it was last remembered at
	ids := map[string]bool{}
	for _, in := range a.inputs { // sorted: offset order per partition
		ts, ok := a.run.InputTimes[in]
		if !ok || in.Offset >= committedAt(a.run.Committed, in.TP()) {
			continue
		}
		s, known := stream[in.TP()]
		if ts >= 0 && (!known || ts > s) {
			s, known = ts, true
		}
		if known {
			stream[in.TP()] = s
		}
		id, keyed := a.run.InputKeys[in]
		if !keyed || len(a.dead[in]) > 0 || a.skipped[in] || a.run.Marks[in].Class.Fails() {
			continue
		}
		ids[id] = true
		if known && (ts > s || ts < 0) {
			ts = s
		}
		if known && s-grace-ts > 0 {
			verdicts[in] = dedupeLate
			continue
		}
		if prev, ok := seen[id]; ok && ts < prev+window {
			verdicts[in] = dedupeDup
			continue
		}
		seen[id] = ts
		verdicts[in] = dedupeFirst
	}
	return verdicts, len(ids)
}

// checkDedupe judges the committed outputs and late records against the
// model (dedupeModel).
func (a *audit) checkDedupe() {
	d := *a.opts.Dedupe
	verdicts, ids := a.dedupeModel(d)
	tot := &DedupeTotals{IDs: ids}
	outs, lates := map[Input]int{}, map[Input]int{}
	for _, o := range a.outputs {
		if !o.Committed || o.Aborted {
			continue
		}
		if d.LateTopic != "" && o.Topic == d.LateTopic {
			lates[o.Source]++
		} else {
			outs[o.Source]++
		}
	}
	for _, in := range slices.SortedFunc(maps.Keys(verdicts), cmpInput) {
		switch v, n, l := verdicts[in], outs[in], lates[in]; v {
		case dedupeDup:
			tot.Duplicates++
			if n > 0 { // one in the late topic is late-wrong (below)
				a.rp.add(DedupePassed, "input %s is a duplicate of an id seen within the window, and has %d outputs", in, n)
			}
		case dedupeLate:
			tot.Late++
			switch {
			case d.LateTopic == "" && n != 1:
				a.rp.add(DedupeMissing, "input %s was late and passes without a late topic, but has %d outputs", in, n)
			case d.LateTopic != "" && (l != 1 || n > 0):
				a.rp.add(LateWrong, "input %s was late and is in the late topic %d times (and has %d outputs)", in, l, n)
			}
		default:
			tot.Passed++
			if n != 1 || l > 0 {
				a.rp.add(DedupeMissing, "input %s is its id's first sighting within the window, and has %d outputs, %d late records", in, n, l)
			}
		}
	}
	for _, in := range slices.SortedFunc(maps.Keys(lates), cmpInput) {
		if v, ok := verdicts[in]; !ok || v != dedupeLate {
			a.rp.add(LateWrong, "input %s is in the late topic %d times, but was not late", in, lates[in])
		}
	}
	a.rep.Dedupe = tot
}
