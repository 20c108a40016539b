package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/streamproc/processor/record"
)

// A run of the join transform joins each input with the row of its
// lookup key (its record key, or Source.GroupBy of its value) in a table
// topic, as the processor has read the table when the input is
// processed. Options.Join asks for this check (eoscheck -check join); the
// reader then keeps each input's lookup key (Run.InputKeys), the row each
// output carries at Source.JoinInto (Output.Row) and every committed
// record of the table topic in offset order (Run.Table). The check
// replays each key's rows as the table's versions (none, then each
// committed row or tombstone in offset order) and walks the inputs the
// processor took in offset order per partition: every row an output
// carries must be a committed version of its key (join-invented
// otherwise), never an older one than an earlier input of the same
// partition and key saw (join-stale: a row from the table's past
// relative to the processing order, or one its future could not have
// been followed by); an inner join's filtered input must have had no row
// possible then, and a left join writes every input (join-missing).

// The anomalies of the join check, in report order.
const (
	// JoinInvented: a visible output carries a row its key never had in
	// the table's committed log (an aborted transaction's, or none).
	JoinInvented Anomaly = "join-invented"
	// JoinStale: a visible output carries a row older than one an
	// earlier input of its partition and key saw.
	JoinStale Anomaly = "join-stale"
	// JoinMissing: a left join's input without an output, or an inner
	// join's filtered input whose key had a row throughout.
	JoinMissing Anomaly = "join-missing"
)

// JoinAnomalies lists the join check's anomalies in report order.
var JoinAnomalies = []Anomaly{JoinInvented, JoinStale, JoinMissing}

// Join are the settings of the join the check judges.
type Join struct {
	// Left: a left join (an input without a row passes with null);
	// else inner (it is filtered).
	Left bool
}

// TableRow is a committed record of a join's table topic.
type TableRow struct {
	Partition int32
	Offset    int64
	Key       string
	Value     []byte // nil: a tombstone
}

// JoinTotals sum up the join check.
type JoinTotals struct {
	Keys     int // distinct lookup keys among the inputs judged
	Joined   int // inputs whose output carries a row
	Misses   int // inputs without a row (filtered, or passed with null)
	Versions int // committed table records read
}

// String renders the totals for the report.
func (t JoinTotals) String() string {
	return fmt.Sprintf("%d keys, %d inputs joined with a row, %d without, %d table records", t.Keys, t.Joined, t.Misses, t.Versions)
}

// canonicalRow is a row's JSON as compared: re-encoded with sorted
// members and numbers as written; "" for none (null, absent, a
// tombstone); the bytes themselves when they are not JSON.
func canonicalRow(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(b)
	}
	return string(out)
}

// joinVersions returns each key's versions: none first, then every
// committed row of it in offset order (partition by partition).
func (a *audit) joinVersions() map[string][]string {
	rows := slices.Clone(a.run.Table)
	slices.SortStableFunc(rows, func(x, y TableRow) int {
		if x.Partition != y.Partition {
			return int(x.Partition - y.Partition)
		}
		return int(x.Offset - y.Offset)
	})
	versions := map[string][]string{}
	for _, r := range rows {
		if versions[r.Key] == nil {
			versions[r.Key] = []string{""}
		}
		versions[r.Key] = append(versions[r.Key], canonicalRow(r.Value))
	}
	return versions
}

// checkJoin judges the committed outputs against the table's versions.
func (a *audit) checkJoin() {
	versions := a.joinVersions()
	tot := &JoinTotals{Versions: len(a.run.Table)}
	outs := map[Input][]Output{}
	for _, o := range a.outputs {
		if o.Committed && !o.Aborted {
			outs[o.Source] = append(outs[o.Source], o)
		}
	}
	type seen struct {
		tp  record.TopicPartition
		key string
	}
	floor := map[seen]int{} // the oldest version an input may still see
	keys := map[string]bool{}
	for _, in := range a.inputs { // sorted: offset order per partition
		key, keyed := a.run.InputKeys[in]
		if in.Offset >= committedAt(a.run.Committed, in.TP()) || len(a.dead[in]) > 0 || a.skipped[in] || a.run.Marks[in].Class.Fails() {
			continue
		}
		keys[key] = true
		vs := versions[key]
		if vs == nil || !keyed {
			vs = []string{""}
		}
		s := seen{in.TP(), key}
		find := func(row string) int {
			for i := floor[s]; i < len(vs); i++ {
				if vs[i] == row {
					return i
				}
			}
			return -1
		}
		os := outs[in]
		if len(os) == 0 {
			if a.opts.Join.Left {
				a.rp.add(JoinMissing, "input %s (key %q) has no output, but a left join writes every input", in, key)
				continue
			}
			tot.Misses++
			if i := find(""); i < 0 {
				a.rp.add(JoinMissing, "input %s (key %q) was filtered, but its key had a row from its last output's on", in, key)
			} else {
				floor[s] = i
			}
			continue
		}
		for _, o := range os {
			row := canonicalRow(o.Row)
			if row == "" {
				tot.Misses++
			} else {
				tot.Joined++
			}
			switch i := find(row); {
			case i >= 0:
				floor[s] = i
			case slices.Contains(vs, row):
				a.rp.add(JoinStale, "%s (from %s, key %q) carries a row older than an earlier input of its partition saw: %s", o, in, key, clipRow(row))
			default:
				a.rp.add(JoinInvented, "%s (from %s, key %q) carries a row its key never had in the table: %s", o, in, key, clipRow(row))
			}
		}
	}
	tot.Keys = len(keys)
	a.rep.Join = tot
}

// clipRow shortens a row for an example.
func clipRow(row string) string {
	if row == "" {
		return "null"
	}
	if len(row) > 120 {
		return row[:120] + "..."
	}
	return row
}

// Raw returns the JSON at the path in value, and whether the value is a
// JSON object along the path with the member present.
func (p GroupPath) Raw(value []byte) (json.RawMessage, bool) {
	raw := json.RawMessage(value)
	for _, name := range p {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return nil, false
		}
		var ok bool
		if raw, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return raw, true
}
