package check

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamproc/processor/record"
)

// A run of the aggregate transform counting by record key in windows
// with EMIT=close (FUNCTION count, BY unset, WINDOW, WINDOW_ADVANCE,
// GRACE) emits exactly one final row per key and window once the
// partition's stream time (the largest input timestamp so far, in offset
// order) reaches the window's end plus the grace: key <key>@<window
// start ms>, value {"key": ..., "value": <count>, "window_start": ...,
// "window_end": ...}. Options.Windows asks for this check (eoscheck
// -check windows); the reader then keeps each output's count
// (ParseWindowCount), each input's key and timestamp. The check replays
// the inputs the processor took through a reference model of the
// windows: an input whose every window had closed by the stream time as
// of it is late, not counted, and must be in the late topic once (with
// Windows.LateTopic; without one it was dropped, and is counted in
// WindowTotals.Dropped); every other counts in each window still open.
// The stream time covers every input before the committed offset, the
// dead-lettered included (the processor computes it before the chain
// runs); only inputs that succeeded are counted: none with a dead letter,
// and none whose mark (-poison) says it fails the chain, dead-lettered
// or skipped by policy.

// The anomalies of the windows check, in report order.
const (
	// WindowDuplicate: a (key, window) with more than one committed
	// final row.
	WindowDuplicate Anomaly = "window-duplicate"
	// WindowMissing: a window the committed stream time closed, with
	// inputs counted, and no committed final row.
	WindowMissing Anomaly = "window-missing"
	// WindowCount: a final row whose count is not the number of the
	// window's inputs that were not late, or a final row of a window
	// that has not closed or had no input counted.
	WindowCount Anomaly = "window-count"
	// LateWrong: an input the model finds late that is not in the late
	// topic once (none, or more than once), or a record in the late topic
	// of an input that was not late.
	LateWrong Anomaly = "late-wrong"
)

// WindowAnomalies lists the windows check's anomalies in report order.
var WindowAnomalies = []Anomaly{WindowDuplicate, WindowMissing, WindowCount, LateWrong}

// Windows are the settings of the windowed count the check judges.
type Windows struct {
	Size, Advance, Grace time.Duration // Advance 0: tumbling
	// LateTopic is PROCESSOR_LATE_TOPIC, one of the output topics read;
	// empty: late inputs were dropped.
	LateTopic string
}

// WindowTotals sum up the windows check.
type WindowTotals struct {
	Closed  int // windows closed with inputs counted
	Rows    int // committed final rows
	Late    int // inputs the model finds late
	Dropped int // of them, dropped (no late topic)
}

// ParseWindowCount reads a windowed count's final row: its count; ok is
// false for any other value.
func ParseWindowCount(value []byte) (count int64, ok bool) {
	var v struct {
		Value       json.RawMessage `json:"value"`
		WindowStart json.RawMessage `json:"window_start"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.WindowStart == nil {
		return 0, false
	}
	if err := json.Unmarshal(v.Value, &count); err != nil {
		return 0, false
	}
	return count, true
}

// floorMs is the largest multiple of step (above 0) at or below x: x
// less its remainder brought into [0, step). The transform aligns its
// windows by another route (a quotient rounded down), so a slip in
// either shows as a window the other does not have.
func floorMs(x, step int64) int64 {
	return x - (x%step+step)%step
}

// windowModel replays the taken inputs: the count of each window
// ("<key>@<start>") the committed stream time closed, and the late
// inputs.
func (a *audit) windowModel(w Windows) (closed map[string]int64, late map[Input]bool) {
	size, adv, grace := w.Size.Milliseconds(), w.Advance.Milliseconds(), w.Grace.Milliseconds()
	if adv <= 0 {
		adv = size
	}
	closed, late = map[string]int64{}, map[Input]bool{}
	counts := map[string]int64{}
	ends := map[string]int64{} // window -> its end plus grace
	stream := map[record.TopicPartition]int64{}
	for _, in := range a.inputs { // sorted: offset order per partition
		ts, ok := a.run.InputTimes[in]
		if !ok || in.Offset >= committedAt(a.run.Committed, in.TP()) {
			continue
		}
		s, seen := stream[in.TP()]
		if !seen || ts > s {
			s = ts
		}
		stream[in.TP()] = s
		key, keyed := a.run.InputKeys[in]
		if !keyed || ts < 0 || len(a.dead[in]) > 0 || a.skipped[in] || a.run.Marks[in].Class.Fails() {
			continue
		}
		last := floorMs(ts, adv)
		if last+size+grace <= s {
			late[in] = true
			continue
		}
		for start := floorMs(ts-size, adv) + adv; start <= last; start += adv {
			if start+size+grace <= s {
				continue
			}
			k := key + "@" + strconv.FormatInt(start, 10)
			counts[k]++
			ends[k] = start + size + grace
		}
	}
	final := map[string]int64{} // a key's partition's stream time
	for _, in := range a.inputs {
		if key, ok := a.run.InputKeys[in]; ok {
			if s, ok := stream[in.TP()]; ok {
				final[key] = s
			}
		}
	}
	for k, n := range counts {
		key := k[:strings.LastIndexByte(k, '@')]
		if ends[k] <= final[key] {
			closed[k] = n
		}
	}
	return closed, late
}

// eachFinalRow goes through the windows' final rows in key order: it
// reports a window with more than one and a row that is not a windowed
// count, and hands each window's first row, if a count, to check.
func (a *audit) eachFinalRow(rows map[string][]Output, check func(k string, o Output)) {
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		os := rows[k]
		if len(os) > 1 {
			a.rp.add(WindowDuplicate, "window %s: %d final rows (%s, %s)", k, len(os), os[0], os[1])
		}
		if !os[0].CountOK {
			a.rp.add(WindowCount, "%s (window %s) is not a windowed count", os[0], k)
			continue
		}
		check(k, os[0])
	}
}

// checkWindows judges the committed final rows and late records against
// the model (windowModel).
func (a *audit) checkWindows() {
	w := *a.opts.Windows
	tot := &WindowTotals{}
	rows := map[string][]Output{}
	lateSeen := map[Input]int{}
	for _, o := range a.outputs {
		if !o.Committed || o.Aborted {
			continue
		}
		if o.Topic == w.LateTopic {
			lateSeen[o.Source]++
			continue
		}
		rows[o.Key] = append(rows[o.Key], o)
		tot.Rows++
	}
	a.rep.Windows = tot
	if len(a.opts.GroupBy) > 0 {
		a.checkHopWindows(rows, lateSeen, tot) // behind a repartition hop
		return
	}
	closed, late := a.windowModel(w)
	tot.Closed, tot.Late = len(closed), len(late)
	a.eachFinalRow(rows, func(k string, o Output) {
		want, ok := closed[k]
		switch {
		case !ok:
			a.rp.add(WindowCount, "%s: a final row of window %s, counting %d, which has not closed or counted no input", o, k, o.Count)
		case o.Count != want:
			a.rp.add(WindowCount, "%s: window %s counts %d, but %d of its inputs were not late", o, k, o.Count, want)
		}
	})
	for _, k := range slices.Sorted(maps.Keys(closed)) {
		if _, ok := rows[k]; !ok {
			a.rp.add(WindowMissing, "window %s closed with %d inputs counted and has no final row", k, closed[k])
		}
	}
	var ins []Input
	for in := range late {
		ins = append(ins, in)
	}
	for in := range lateSeen {
		if !late[in] {
			ins = append(ins, in)
		}
	}
	slices.SortFunc(ins, cmpInput)
	for _, in := range ins {
		n := lateSeen[in]
		switch {
		case !late[in]:
			a.rp.add(LateWrong, "input %s is in the late topic %d times, but was not late", in, n)
		case w.LateTopic == "":
			tot.Dropped++
		case n != 1:
			a.rp.add(LateWrong, "input %s was late and is in the late topic %d times", in, n)
		}
	}
}

// String renders the totals for the report.
func (t WindowTotals) String() string {
	return fmt.Sprintf("%d windows closed, %d final rows, %d inputs late (%d dropped)", t.Closed, t.Rows, t.Late, t.Dropped)
}
