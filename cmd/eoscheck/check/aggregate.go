package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/streamproc/processor/record"
)

// A run of the aggregate transform counting by record key (FUNCTION
// count, BY unset) emits, for every input, its key's updated count: the
// output's key is the input's, its value {"key": <key>, "value": <count>}.
// Exactly once means that a read_committed reader sees every key's counts
// run 1, 2, 3, ... in output order, with no repeat and no gap, up to the
// number of that key's inputs the processor took (those without a dead
// letter, and not skipped by policy). Options.Aggregate asks for this
// check (eoscheck -check aggregate); the reader then keeps each output's
// count (Output.Count) and the key its value names (Output.CountKey), and
// each input's key (Run.InputKeys). An output's value must name its
// record key, in record.AppendKeyJSON's rendering (a key that is not
// UTF-8 as {"base64": ...}), and its record key must be its input's.

// The anomalies of the aggregate check, in the order the report lists
// them after the others.
const (
	// CountRepeat: a key's count is not above the count before it in the
	// committed output: the state went back (a committed write lost in a
	// restore, so that the next input counts again from an older value).
	CountRepeat Anomaly = "count-repeat"
	// CountGap: a key's count is more than one above the count before it
	// (or the key's first count is above 1): a count was written to the
	// state but its output is not visible, e.g. state that kept an
	// aborted transaction's write.
	CountGap Anomaly = "count-gap"
	// CountShort: a key's last committed count is below the number of its
	// inputs the processor took: an input processed (the group committed
	// past it, no dead letter, not skipped) whose count never showed, or
	// state lost in a restore.
	CountShort Anomaly = "count-short"
	// CountExcess: a key's last committed count is above the number of
	// its inputs the processor took: an input counted twice, each count
	// visible once (a duplicate by lineage too).
	CountExcess Anomaly = "count-excess"
	// CountValue: a visible output whose value is not an aggregate count
	// ({"key": ..., "value": <integer>}) of a keyed record, so its key's
	// sequence cannot be judged.
	CountValue Anomaly = "count-value"
	// CountKey: a visible count whose value names another key than its
	// record key ("key" null, absent, another key, or not the key's one
	// rendering, record.AppendKeyJSON), or whose record key is not its
	// input's: the count is judged under its record key all the same.
	CountKey Anomaly = "count-key"
)

// AggregateAnomalies lists the aggregate check's anomalies in report
// order; the report has their rows only when the check ran.
var AggregateAnomalies = []Anomaly{CountRepeat, CountGap, CountShort, CountExcess, CountValue, CountKey}

// AggregateTotals sum up the aggregate check: the keys counted, and the
// sum of their last counts, which in a clean run is the number of inputs
// taken.
type AggregateTotals struct {
	Keys  int   // keys with an input taken or a visible count
	Final int64 // the sum over keys of the last visible count
	Max   int64 // the highest last count of one key
	// GroupBy is Options.GroupBy's path (".customer"), "" when the
	// counts were by record key.
	GroupBy string
}

// ParseCount reads an aggregate count output's value, {"key": ...,
// "value": <integer>}, and returns the count; ok is false for any other
// value (not JSON, no "key", no integer "value", a window's aggregate).
func ParseCount(value []byte) (count int64, ok bool) {
	count, key, ok := ParseAggregate(value)
	if !ok || key == nil {
		return 0, false
	}
	return count, true
}

// ParseAggregate reads an aggregate count output's value: its count, and
// its "key" member as it stands (nil when absent), for the check of the
// key against the record's. ok is false when the value is no count (not
// a JSON object, no integer "value", a window's aggregate).
func ParseAggregate(value []byte) (count int64, key json.RawMessage, ok bool) {
	var v struct {
		Key         json.RawMessage `json:"key"`
		Value       json.RawMessage `json:"value"`
		WindowStart json.RawMessage `json:"window_start"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.WindowStart != nil {
		return 0, nil, false
	}
	if err := json.Unmarshal(v.Value, &count); err != nil || bytes.ContainsAny(v.Value, ".eE") {
		return 0, nil, false
	}
	return count, v.Key, true
}

// checkCountKey reports a CountKey anomaly when o's value does not name
// its record key, or its record key is not its input's.
func (a *audit) checkCountKey(o Output) {
	key, err := record.ParseKeyJSON(o.CountKey)
	switch {
	case o.CountKey == nil:
		a.rp.add(CountKey, "%s (from %s): its value names no key; its record key is %s", o, o.Source, record.AppendKeyJSON(nil, []byte(o.Key)))
	case err != nil:
		a.rp.add(CountKey, "%s (from %s): its value's key %.80s is not the rendering of a key (%v); its record key is %s", o, o.Source, o.CountKey, err, record.AppendKeyJSON(nil, []byte(o.Key)))
	case string(key) != o.Key:
		a.rp.add(CountKey, "%s (from %s): its value's key %.80s names another key than its record key %s", o, o.Source, o.CountKey, record.AppendKeyJSON(nil, []byte(o.Key)))
	}
	if in, ok := a.run.InputKeys[o.Source]; ok && in != o.Key {
		a.rp.add(CountKey, "%s (from %s): its record key %s is not its input's %s", o, o.Source, record.AppendKeyJSON(nil, []byte(o.Key)), record.AppendKeyJSON(nil, []byte(in)))
	}
}

// checkAggregate judges every key's counts in the committed output, in
// output order (by position: one key's outputs are in one partition of
// the output topic, which key-order checks), then each key's last count
// against its inputs taken: the inputs with the key and no visible dead
// letter, neither skipped by policy nor left unprocessed (at or past the
// committed offset without a visible output).
func (a *audit) checkAggregate() {
	type last struct {
		count int64
		at    Output
	}
	seen := map[string]*last{}
	var keys []string
	for _, o := range a.outputs {
		if !o.Committed || o.Aborted {
			continue
		}
		if !o.Keyed || !o.CountOK {
			a.rp.add(CountValue, "%s (from %s) is not an aggregate count of a keyed record", o, o.Source)
			continue
		}
		if len(a.opts.GroupBy) > 0 {
			a.checkGroupKey(o)
		} else {
			a.checkCountKey(o)
		}
		l := seen[o.Key]
		if l == nil {
			l = &last{}
			seen[o.Key] = l
			keys = append(keys, o.Key)
		}
		switch {
		case o.Count <= l.count:
			a.rp.add(CountRepeat, "%s (from %s): key %q counts %d after %d%s", o, o.Source, o.Key, o.Count, l.count, after(l.at))
		case o.Count > l.count+1:
			a.rp.add(CountGap, "%s (from %s): key %q counts %d after %d%s: %d counts missing", o, o.Source, o.Key, o.Count, l.count, after(l.at), o.Count-l.count-1)
		}
		l.count, l.at = o.Count, o
	}
	taken := map[string]int64{}
	committed := a.run.Committed
	for _, in := range a.inputs {
		key, ok := a.run.InputKeys[in]
		switch {
		case !ok, len(a.dead[in]) > 0, a.skipped[in]:
			continue
		case len(a.visible[in]) == 0 && in.Offset >= committedAt(committed, in.TP()):
			continue // not processed yet (uncommitted, when all should be)
		}
		if taken[key] == 0 && seen[key] == nil {
			keys = append(keys, key)
		}
		taken[key]++
	}
	tot := &AggregateTotals{GroupBy: a.opts.GroupBy.String()}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		var final int64
		if l := seen[k]; l != nil {
			final = l.count
		}
		tot.Keys++
		tot.Final += final
		tot.Max = max(tot.Max, final)
		switch want := taken[k]; {
		case final < want:
			a.rp.add(CountShort, "key %q: last count %d, but %d of its inputs were taken", k, final, want)
		case final > want:
			a.rp.add(CountExcess, "key %q: last count %d, but only %d of its inputs were taken", k, final, want)
		}
	}
	a.rep.Aggregate = tot
}

// after renders " (at out/0@7)" for the output of the count before, or
// "" when there was none.
func after(o Output) string {
	if o.Topic == "" {
		return ""
	}
	return fmt.Sprintf(" (at %s)", o)
}
