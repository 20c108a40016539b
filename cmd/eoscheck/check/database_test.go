package check

import (
	"strings"
	"testing"

	"github.com/streamproc/processor/record"
)

// dbRun is a run into PostgreSQL of an identity processor: input "in" with
// partitions 0 and 1 of n records each, one row of seq 0 per input, and
// both stored offsets at the end.
func dbRun(n int64) DatabaseRun {
	run := DatabaseRun{InputEnds: map[record.TopicPartition]int64{}, Stored: map[record.TopicPartition]int64{},
		Table: "recs", DeadLetterTable: "dead", DeadLetters: []DeadLetterRow{}}
	for p := int32(0); p < 2; p++ {
		for o := int64(0); o < n; o++ {
			in := Input{"in", p, o}
			run.Inputs = append(run.Inputs, in)
			run.Rows = append(run.Rows, Row{Source: in})
		}
		run.InputEnds[tp("in", p)] = n
		run.Stored[tp("in", p)] = n
	}
	return run
}

// without returns rows without those of src.
func without(rows []Row, src Input) []Row {
	var out []Row
	for _, r := range rows {
		if r.Source != src {
			out = append(out, r)
		}
	}
	return out
}

func TestCheckDatabase(t *testing.T) {
	oneToOne := Options{OneToOne: true, ExpectAll: true}
	for _, tc := range []struct {
		name   string
		opts   Options
		change func(*DatabaseRun)
		want   map[Anomaly]int
		// example is a substring of the first example of each anomaly.
		example map[Anomaly]string
	}{
		{name: "clean", opts: oneToOne, change: func(*DatabaseRun) {}},
		{name: "duplicate row", opts: oneToOne, change: func(r *DatabaseRun) { r.Rows = append(r.Rows, Row{Source: Input{"in", 1, 2}}) },
			want: map[Anomaly]int{Duplicate: 1}, example: map[Anomaly]string{Duplicate: "in/1@2 has 2 rows (seq 0, 0), want one"}},
		{name: "second output of a one-to-one input", opts: oneToOne,
			change: func(r *DatabaseRun) { r.Rows = append(r.Rows, Row{Source: Input{"in", 0, 1}, Seq: 1}) },
			want:   map[Anomaly]int{Duplicate: 1}, example: map[Anomaly]string{Duplicate: "in/0@1 has 2 rows (seq 0, 1)"}},
		{name: "lost", opts: oneToOne, change: func(r *DatabaseRun) { r.Rows = without(r.Rows, Input{"in", 0, 3}) },
			want:    map[Anomaly]int{Lost: 1},
			example: map[Anomaly]string{Lost: "in/0@3 is below the stored next offset 5 but has no row and no dead letter (lost or skipped)"}},
		{name: "only seq 1", opts: oneToOne, change: func(r *DatabaseRun) {
			r.Rows = append(without(r.Rows, Input{"in", 0, 3}), Row{Source: Input{"in", 0, 3}, Seq: 1})
		}, want: map[Anomaly]int{Lost: 1}, example: map[Anomaly]string{Lost: "has no row of seq 0 (seq 1)"}},
		{name: "row beyond the stored offset", opts: oneToOne, change: func(r *DatabaseRun) { r.Stored[tp("in", 1)] = 4 },
			want: map[Anomaly]int{OffsetMismatch: 1}, example: map[Anomaly]string{OffsetMismatch: "row in/1@4 seq 0 of recs is at or past the stored next offset 4 of in/1"}},
		{name: "no stored offset", opts: oneToOne, change: func(r *DatabaseRun) { delete(r.Stored, tp("in", 1)) },
			want: map[Anomaly]int{OffsetMismatch: 5}},
		{name: "stored offset short of the end", opts: oneToOne, change: func(r *DatabaseRun) {
			r.Stored[tp("in", 1)] = 3
			r.Rows = without(without(r.Rows, Input{"in", 1, 3}), Input{"in", 1, 4})
		}, want: map[Anomaly]int{Uncommitted: 2}, example: map[Anomaly]string{Uncommitted: "in/1@3 is at or past the stored next offset 3"}},
		{name: "stored offset short of the end, not expected", opts: Options{OneToOne: true}, change: func(r *DatabaseRun) {
			r.Stored[tp("in", 1)] = 3
			r.Rows = without(without(r.Rows, Input{"in", 1, 3}), Input{"in", 1, 4})
		}},
		{name: "stored offset beyond the end", opts: oneToOne, change: func(r *DatabaseRun) { r.Stored[tp("in", 0)] = 6 },
			want: map[Anomaly]int{OffsetMismatch: 1}, example: map[Anomaly]string{OffsetMismatch: "in/0: stored next offset 6 is beyond the log end 5"}},
		{name: "stored offset of a partition that does not exist", opts: oneToOne, change: func(r *DatabaseRun) { r.Stored[tp("in", 7)] = 1 },
			want: map[Anomaly]int{OffsetMismatch: 1}, example: map[Anomaly]string{OffsetMismatch: "in/7: a next offset 1 is stored for a partition the input does not have"}},
		{name: "phantom", opts: oneToOne, change: func(r *DatabaseRun) { r.Rows = append(r.Rows, Row{Source: Input{"other", 0, 0}}) },
			want: map[Anomaly]int{Phantom: 1}, example: map[Anomaly]string{Phantom: "row other/0@0 seq 0 of recs names no input record"}},
		{name: "dead letter instead of a row", opts: oneToOne, change: func(r *DatabaseRun) {
			r.Rows = without(r.Rows, Input{"in", 0, 2})
			r.DeadLetters = append(r.DeadLetters, DeadLetterRow{Source: Input{"in", 0, 2}, Error: "jq: boom", Stage: "jq", Attempts: 1})
		}, want: map[Anomaly]int{DeadLetter: 1}, example: map[Anomaly]string{DeadLetter: `in/0@2 has a dead letter in dead, stage "jq", attempts 1, error "jq: boom"`}},
		{name: "dead letter beside a row", opts: oneToOne, change: func(r *DatabaseRun) {
			r.DeadLetters = append(r.DeadLetters, DeadLetterRow{Source: Input{"in", 0, 2}, Error: "x"})
		}, want: map[Anomaly]int{DeadLetter: 1, Duplicate: 1}, example: map[Anomaly]string{Duplicate: "in/0@2 has 1 rows (seq 0) and 1 dead letters"}},
		{name: "dead letter past the stored offset", opts: oneToOne, change: func(r *DatabaseRun) {
			r.Stored[tp("in", 0)] = 4
			r.Rows = without(r.Rows, Input{"in", 0, 4})
			r.DeadLetters = append(r.DeadLetters, DeadLetterRow{Source: Input{"in", 0, 4}, Error: "x"})
		}, want: map[Anomaly]int{DeadLetter: 1, OffsetMismatch: 1}},
		{name: "flat-map: seq twice", opts: Options{ExpectAll: true}, change: func(r *DatabaseRun) {
			r.Rows = append(r.Rows, Row{Source: Input{"in", 0, 1}, Seq: 1}, Row{Source: Input{"in", 0, 1}, Seq: 1})
		}, want: map[Anomaly]int{Duplicate: 1}, example: map[Anomaly]string{Duplicate: "in/0@1 has seq 1 twice (seq 0, 1, 1)"}},
		{name: "flat-map: several outputs, none lost", opts: Options{ExpectAll: true}, change: func(r *DatabaseRun) {
			r.Rows = append(without(r.Rows, Input{"in", 0, 3}), Row{Source: Input{"in", 0, 1}, Seq: 1}, Row{Source: Input{"in", 0, 1}, Seq: 2})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := dbRun(5)
			tc.change(&run)
			rep := CheckDatabase(run, tc.opts)
			expectDatabase(t, rep, tc.want)
			expectDetails(t, rep, tc.example, nil)
			if t.Failed() {
				t.Logf("\n%s", rep.Table())
			}
		})
	}
}

func TestDatabaseTable(t *testing.T) {
	run := dbRun(3)
	run.Stored[tp("in", 1)] = 2
	run.Rows = without(run.Rows, Input{"in", 1, 2})
	got := CheckDatabase(run, Options{OneToOne: true, ExpectAll: true}).Table()
	want := `ANOMALY          COUNT  EXAMPLE
duplicate        0      -
lost             0      -
offset-mismatch  0      -
uncommitted      1      in/1@2 is at or past the stored next offset 2
phantom          0      -
dead-letter      0      -
inputs           6
outputs (rows)   5 in recs
dead letters     0 in dead
offsets stored   2 of 2 input partitions, 1 at the log end
result: 1 ANOMALIES (uncommitted 1)
`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestCheckDatabasePoison judges the marked inputs of a run into
// PostgreSQL: in/0@1 notjson (a dead letter, or skipped), in/1@2
// nearlimit (a jsonb row), in/1@3 jsonb (a row with value NULL and
// value_bytes holding the payload).
func TestCheckDatabasePoison(t *testing.T) {
	strictDB := Options{OneToOne: true, ExpectAll: true}
	skipping := Options{OneToOne: true, ExpectAll: true, Skipping: true}
	payload := []byte("1" + strings.Repeat("7", 139_999))
	stored := []byte(`{"key":"poison-jsonb-3","poison":` + string(payload) + `,"seen":true,"seq":3}`)
	notJSON, nearLimit, jsonb := Input{"in", 0, 1}, Input{"in", 1, 2}, Input{"in", 1, 3}
	dl := DeadLetterRow{Source: notJSON, Error: "transform jq: the value is not JSON", Stage: "jq", Attempts: 1}
	// good is the run as the classes want it.
	good := func() DatabaseRun {
		r := dbRun(5)
		r.Marks = map[Input]Mark{notJSON: {Class: NotJSON}, nearLimit: {Class: NearLimit}, jsonb: {Class: JSONBRefused, Payload: payload}}
		for i, row := range r.Rows {
			r.Rows[i].JSON = row.Source != jsonb
			if row.Source == jsonb {
				r.Rows[i].Bytes = stored
			}
		}
		r.Rows = without(r.Rows, notJSON)
		r.DeadLetters = []DeadLetterRow{dl}
		return r
	}
	setRow := func(r *DatabaseRun, src Input, json bool, b []byte) {
		for i := range r.Rows {
			if r.Rows[i].Source == src {
				r.Rows[i].JSON, r.Rows[i].Bytes = json, b
			}
		}
	}
	for _, tc := range []struct {
		name    string
		opts    Options
		change  func(*DatabaseRun)
		want    map[Anomaly]int
		example map[Anomaly]string
		totals  map[Class]ClassTotals
	}{
		{name: "each as its class wants", opts: strictDB, change: func(*DatabaseRun) {},
			totals: map[Class]ClassTotals{NotJSON: {Inputs: 1, DeadLetters: 1}, NearLimit: {Inputs: 1, Outputs: 1}, JSONBRefused: {Inputs: 1, Outputs: 1}}},
		{name: "notjson skipped by policy", opts: skipping, change: func(r *DatabaseRun) { r.DeadLetters = []DeadLetterRow{} },
			totals: map[Class]ClassTotals{NotJSON: {Inputs: 1, Skipped: 1}}},
		{name: "notjson missing without skip instances", opts: strictDB, change: func(r *DatabaseRun) { r.DeadLetters = []DeadLetterRow{} },
			want:    map[Anomaly]int{Lost: 1},
			example: map[Anomaly]string{Lost: "notjson input in/0@1 is below the stored next offset 5 but has no row and no dead letter"}},
		{name: "notjson stored as a row", opts: skipping, change: func(r *DatabaseRun) {
			r.DeadLetters = []DeadLetterRow{}
			r.Rows = append(r.Rows, Row{Source: notJSON, Bytes: []byte("not json")})
		}, want: map[Anomaly]int{PoisonPassed: 1},
			example: map[Anomaly]string{PoisonPassed: "notjson input in/0@1, which must fail the chain, has row in/0@1 seq 0 in recs"}},
		{name: "jsonb blocked the batch: stored offset short, no row", opts: strictDB, change: func(r *DatabaseRun) {
			r.Stored[tp("in", 1)] = 3
			r.Rows = without(without(r.Rows, jsonb), Input{"in", 1, 4})
		}, want: map[Anomaly]int{Uncommitted: 2}},
		{name: "jsonb dead-lettered", opts: skipping, change: func(r *DatabaseRun) {
			r.Rows = without(r.Rows, jsonb)
			r.DeadLetters = append(r.DeadLetters, DeadLetterRow{Source: jsonb, Error: "value overflows numeric format (SQLSTATE 22003)", Stage: "sink"})
		}, want: map[Anomaly]int{DeadLetter: 1}, example: map[Anomaly]string{DeadLetter: `in/1@3 has a dead letter in dead, stage "sink"`},
			totals: map[Class]ClassTotals{JSONBRefused: {Inputs: 1, DeadLetters: 1}}},
		{name: "jsonb in the jsonb column", opts: strictDB, change: func(r *DatabaseRun) { setRow(r, jsonb, true, nil) },
			want: map[Anomaly]int{Misstored: 1}, example: map[Anomaly]string{Misstored: "jsonb input in/1@3: row in/1@3 seq 0 of recs has its value in the jsonb column"}},
		{name: "jsonb without value_bytes", opts: strictDB, change: func(r *DatabaseRun) { setRow(r, jsonb, false, nil) },
			want: map[Anomaly]int{Misstored: 1}, example: map[Anomaly]string{Misstored: "has neither value nor value_bytes"}},
		{name: "jsonb with value_bytes lacking the payload", opts: strictDB, change: func(r *DatabaseRun) { setRow(r, jsonb, false, stored[:1000]) },
			want: map[Anomaly]int{Misstored: 1}, example: map[Anomaly]string{Misstored: `the value_bytes of row in/1@3 seq 0 of recs (1000 bytes) do not hold the input's "poison" member (140000 bytes)`}},
		{name: "nearlimit in value_bytes", opts: strictDB, change: func(r *DatabaseRun) { setRow(r, nearLimit, false, []byte(`{"pad":"x"}`)) },
			want: map[Anomaly]int{Misstored: 1}, example: map[Anomaly]string{Misstored: "nearlimit input in/1@2: row in/1@2 seq 0 of recs has no jsonb value"}},
		{name: "nearlimit missing, skip instances or not", opts: skipping, change: func(r *DatabaseRun) { r.Rows = without(r.Rows, nearLimit) },
			want: map[Anomaly]int{Lost: 1}, example: map[Anomaly]string{Lost: "nearlimit input in/1@2 is below the stored next offset 5 but has no row"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := good()
			tc.change(&run)
			rep := CheckDatabase(run, tc.opts)
			expectDatabase(t, rep, tc.want)
			expectDetails(t, rep, tc.example, tc.totals)
			if t.Failed() {
				t.Logf("\n%s", rep.Table())
			}
		})
	}
}

// expectDatabase checks the counts of every database anomaly.
func expectDatabase(t *testing.T, rep Report, want map[Anomaly]int) {
	t.Helper()
	for _, a := range DatabaseAnomalies {
		if rep.Counts[a] != want[a] {
			t.Errorf("%s = %d, want %d; examples %.300q", a, rep.Counts[a], want[a], rep.Examples[a])
		}
	}
}
