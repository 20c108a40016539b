package check

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// A windowed count grouped by a member of the value (Options.GroupBy
// with Options.Windows: the aggregate with BY, WINDOW and EMIT=close)
// runs behind a repartition hop, where a group's records from every
// input partition interleave in one partition of the repartition topic
// in the order the first segment committed them, and its stream time is
// that partition's (docs/state.md, "Stream time"). That order is not in
// the input, so the check cannot replay which inputs were late; it
// takes the late topic as the record of them and judges everything that
// follows from it, for tumbling windows:
//
//   - every input in the late topic is there once and could be late: its
//     window's end plus grace is at or before the largest timestamp of
//     the inputs taken (no stream time anywhere went further);
//   - every final row is its window's inputs that succeeded less those
//     in the late topic, once per (group, window), of a window that could
//     have closed (end plus grace at or before that largest timestamp),
//     and names by its lineage one of the inputs it counted (an original
//     input, never a record of the repartition topic);
//   - a window with inputs counted whose end plus grace is at or before
//     the largest timestamp of its own group's inputs (all in its
//     repartition partition, whose stream time is then at least that)
//     has closed: it has a final row.

// hopWindowModel returns, for a windowed count behind a hop, each
// window's count of inputs not in the late topic (lateSeen), the
// windows that must have closed, the largest timestamp of the inputs
// taken, and each taken input's window ("<group>@<start>") and its end
// plus grace.
func (a *audit) hopWindowModel(w Windows, lateSeen map[Input]int) (counts map[string]int64, closed map[string]bool, top int64, of map[Input]string, ends map[string]int64) {
	size, grace := w.Size.Milliseconds(), w.Grace.Milliseconds()
	counts, closed, of, ends = map[string]int64{}, map[string]bool{}, map[Input]string{}, map[string]int64{}
	groupTop := map[string]int64{}
	top = -1
	for _, in := range a.inputs {
		ts, ok := a.run.InputTimes[in]
		if !ok || in.Offset >= committedAt(a.run.Committed, in.TP()) {
			continue
		}
		key, keyed := a.run.InputKeys[in]
		if !keyed || ts < 0 || len(a.dead[in]) > 0 || a.skipped[in] || a.run.Marks[in].Class.Fails() {
			continue
		}
		top = max(top, ts)
		if t, ok := groupTop[key]; !ok || ts > t {
			groupTop[key] = ts
		}
		start := floorMs(ts, size)
		k := key + "@" + strconv.FormatInt(start, 10)
		of[in], ends[k] = k, start+size+grace
		if lateSeen[in] == 0 {
			counts[k]++
		}
	}
	for k, n := range counts {
		if n > 0 && ends[k] <= groupTop[k[:strings.LastIndexByte(k, '@')]] {
			closed[k] = true
		}
	}
	return counts, closed, top, of, ends
}

// checkHopWindows judges a windowed count behind a hop (hopWindowModel)
// by its committed final rows and late records.
func (a *audit) checkHopWindows(rows map[string][]Output, lateSeen map[Input]int, tot *WindowTotals) {
	w := *a.opts.Windows
	counts, closed, top, of, ends := a.hopWindowModel(w, lateSeen)
	tot.Closed = len(closed)
	a.eachFinalRow(rows, func(k string, o Output) {
		end, known := ends[k]
		switch {
		case !known || end > top || counts[k] == 0:
			a.rp.add(WindowCount, "%s: a final row of window %s, counting %d, which could not have closed or counted no input", o, k, o.Count)
		case o.Count != counts[k]:
			a.rp.add(WindowCount, "%s: window %s counts %d, but %d of its inputs are not in the late topic", o, k, o.Count, counts[k])
		case of[o.Source] != k || lateSeen[o.Source] > 0:
			a.rp.add(WindowCount, "%s: the final row of window %s names input %s, which it did not count", o, k, o.Source)
		}
	})
	for _, k := range slices.Sorted(maps.Keys(closed)) {
		if _, ok := rows[k]; !ok {
			a.rp.add(WindowMissing, "window %s closed (its group's inputs reach its end plus grace) with %d inputs counted and has no final row", k, counts[k])
		}
	}
	for _, in := range slices.SortedFunc(maps.Keys(lateSeen), cmpInput) {
		k, ok := of[in]
		switch n := lateSeen[in]; {
		case !ok || ends[k] > top:
			a.rp.add(LateWrong, "input %s is in the late topic %d times, but its window could not have closed", in, n)
		case n != 1:
			a.rp.add(LateWrong, "input %s was late and is in the late topic %d times", in, n)
		}
	}
	tot.Late = len(lateSeen)
}
