package check

import (
	"strings"
	"testing"
)

// dbRun is a run into PostgreSQL of an identity processor: input "in" with
// partitions 0 and 1 of n records each, one row of seq 0 per input, and
// both stored offsets at the end.
func dbRun(n int64) DatabaseRun {
	run := DatabaseRun{InputEnds: map[TopicPartition]int64{}, Stored: map[TopicPartition]int64{},
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
			for _, a := range DatabaseAnomalies {
				if rep.Counts[a] != tc.want[a] {
					t.Errorf("%s = %d, want %d; examples %q", a, rep.Counts[a], tc.want[a], rep.Examples[a])
				}
			}
			for a, ex := range tc.example {
				if len(rep.Examples[a]) == 0 || !strings.Contains(rep.Examples[a][0], ex) {
					t.Errorf("%s examples %q, want the first to hold %q", a, rep.Examples[a], ex)
				}
			}
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
