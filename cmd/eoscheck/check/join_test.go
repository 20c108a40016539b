package check

import (
	"testing"

	"github.com/streamproc/processor/record"
)

// joinRun is an inner join of six inputs of in/0 with a table whose key
// a has rows v1 then v2, key b v1 then a tombstone, key c none (an
// aborted row is not in the committed log), committed in full:
//
//	@0 a: v1; @1 b: v1; @2 a: v2 (the table moved on); @3 c: filtered;
//	@4 b: filtered (its tombstone read); @5 a: v2.
//
// The outputs are a correct run's.
func joinRun() Run {
	p0 := record.TopicPartition{Topic: "in", Partition: 0}
	r := Run{Committed: map[record.TopicPartition]int64{p0: 6}, InputEnds: map[record.TopicPartition]int64{p0: 6}, InputKeys: map[Input]string{},
		Table: []TableRow{
			{0, 0, "a", []byte(`{"v": 1, "n":"a"}`)}, {0, 1, "b", []byte(`{"v":1}`)},
			{0, 3, "a", []byte(`{"v":2,"n":"a"}`)}, {0, 4, "b", nil},
		}}
	for i, k := range []string{"a", "b", "a", "c", "b", "a"} {
		in := Input{"in", 0, int64(i)}
		r.Inputs = append(r.Inputs, in)
		r.InputKeys[in] = k
	}
	for i, x := range []struct {
		in  int64
		row string
	}{{0, `{"n":"a","v":1}`}, {1, `{"v":1}`}, {2, `{"n":"a","v":2}`}, {5, `{"n":"a","v":2}`}} {
		r.Outputs = append(r.Outputs, joinOut(int64(i), x.in, x.row))
	}
	return r
}

// joinOut is a committed output at out/0@offset of in/0@in carrying row.
func joinOut(offset, in int64, row string) Output {
	return Output{Topic: "out", Offset: offset, Source: Input{"in", 0, in}, Key: "k", Keyed: true, Committed: true, TxnEnd: -1, Row: []byte(row)}
}

// The join check passes a correct run and catches a row invented, a row
// older than an earlier input saw, a filtered input whose key had a row,
// and a left join's missing output.
func TestJoinCheck(t *testing.T) {
	cases := []struct {
		name   string
		change func(r *Run)
		left   bool
		want   Anomaly
	}{
		{"clean", func(*Run) {}, false, ""},
		{"an aborted row", func(r *Run) { r.Outputs[0].Row = []byte(`{"v":"aborted"}`) }, false, JoinInvented},
		{"a row of another key", func(r *Run) { r.Outputs[1].Row = []byte(`{"n":"a","v":2}`) }, false, JoinInvented},
		{"an older row after a newer one", func(r *Run) { r.Outputs[3].Row = []byte(`{"n":"a","v":1}`) }, false, JoinStale},
		{"a key with a row filtered", func(r *Run) { r.Outputs = r.Outputs[:3] }, false, JoinMissing},
		{"a left join's input without an output", func(*Run) {}, true, JoinMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := joinRun()
			tc.change(&r)
			rep := Check(r, Options{ExpectAll: true, Join: &Join{Left: tc.left}})
			for _, a := range JoinAnomalies {
				want := 0
				if a == tc.want {
					want = 1
					if tc.left {
						want = 2 // @3 and @4
					}
				}
				if rep.Counts[a] != want {
					t.Errorf("%s: %d, want %d", a, rep.Counts[a], want)
				}
			}
			if tc.want == "" && !rep.Clean() {
				t.Errorf("a correct run is not clean: %v", rep.Counts)
			}
			if t.Failed() {
				t.Logf("report:\n%s%v", rep.Table(), rep.Examples)
			}
		})
	}
	rep := Check(joinRun(), Options{ExpectAll: true, Join: &Join{}})
	if rep.Join == nil || *rep.Join != (JoinTotals{Keys: 3, Joined: 4, Misses: 2, Versions: 4}) {
		t.Errorf("totals %+v", rep.Join)
	}
	// A left join writes the filtered ones with a null row.
	r := joinRun()
	r.Outputs = nil
	for i, row := range []string{`{"n":"a","v":1}`, `{"v":1}`, `{"n":"a","v":2}`, "null", "null", `{"n":"a","v":2}`} {
		r.Outputs = append(r.Outputs, joinOut(int64(i), int64(i), row))
	}
	if rep := Check(r, Options{ExpectAll: true, Join: &Join{Left: true}}); !rep.Clean() {
		t.Errorf("a left join: %v %v", rep.Counts, rep.Examples)
	}
	// b's row again after its tombstone was seen: stale.
	r.Outputs = append(r.Outputs[:5:5], joinOut(5, 5, `{"n":"a","v":2}`))
	r.Inputs = append(r.Inputs, Input{"in", 0, 6})
	r.InputKeys[Input{"in", 0, 6}] = "b"
	r.Committed[record.TopicPartition{Topic: "in", Partition: 0}] = 7
	r.InputEnds[record.TopicPartition{Topic: "in", Partition: 0}] = 7
	r.Outputs = append(r.Outputs, joinOut(6, 6, `{"v":1}`))
	if rep := Check(r, Options{ExpectAll: true, Join: &Join{Left: true}}); rep.Counts[JoinStale] != 1 || rep.Counts[JoinInvented] != 0 {
		t.Errorf("b's row after its tombstone: %v", rep.Counts)
	}
}
