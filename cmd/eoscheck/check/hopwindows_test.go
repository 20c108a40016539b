package check

import (
	"testing"
	"time"

	"github.com/streamproc/processor/record"
)

// hopWindowRun is a windowed count by group (10 s tumbling, no grace,
// late topic "late") behind a repartition hop, over six inputs of two
// partitions, committed in full:
//
//	in/0: @0 a 1s, @1 a 12s, @2 b 3s; in/1: @0 a 2s, @1 b 25s, @2 a 4s,
//	which the hop's order made late (in the late topic).
//
// Window a@0 counts 2 and must have closed (group a reached 12s), b@0
// counts 1 and must have closed; a@10000 may have (some stream time
// reached 25s), b@20000 cannot have.
func hopWindowRun() Run {
	p0, p1 := record.TopicPartition{Topic: "in", Partition: 0}, record.TopicPartition{Topic: "in", Partition: 1}
	r := Run{Committed: map[record.TopicPartition]int64{p0: 3, p1: 3}, InputEnds: map[record.TopicPartition]int64{p0: 3, p1: 3},
		InputKeys: map[Input]string{}, InputTimes: map[Input]int64{}}
	for _, x := range []struct {
		in  Input
		key string
		ts  int64
	}{{Input{"in", 0, 0}, "a", 1000}, {Input{"in", 0, 1}, "a", 12000}, {Input{"in", 0, 2}, "b", 3000},
		{Input{"in", 1, 0}, "a", 2000}, {Input{"in", 1, 1}, "b", 25000}, {Input{"in", 1, 2}, "a", 4000}} {
		r.Inputs = append(r.Inputs, x.in)
		r.InputKeys[x.in], r.InputTimes[x.in] = x.key, x.ts
	}
	r.Outputs = []Output{
		finalRow(0, "a@0", 2, 0),
		finalRow(1, "b@0", 1, 2),
		{Topic: "late", Offset: 0, Source: Input{"in", 1, 2}, Key: "a", Keyed: true, Committed: true, TxnEnd: -1},
	}
	r.Outputs[1].Source = Input{"in", 0, 2}
	return r
}

var hopWindowed = Options{ExpectAll: true, GroupBy: GroupPath{"customer"}, Windows: &Windows{Size: 10 * time.Second, LateTopic: "late"}}

// Behind a hop the windows check takes the late topic as the record of
// the late inputs and catches every final row or late record that
// cannot follow from it.
func TestHopWindowsCheck(t *testing.T) {
	cases := []struct {
		name   string
		change func(r *Run)
		want   Anomaly
	}{
		{"clean", func(*Run) {}, ""},
		{"a window that may have closed, closed", func(r *Run) { r.Outputs = append(r.Outputs, finalRow(2, "a@10000", 1, 1)) }, ""},
		{"a duplicate final row", func(r *Run) { r.Outputs = append(r.Outputs, finalRow(2, "b@0", 1, 2)) }, WindowDuplicate},
		{"a final row missing", func(r *Run) { r.Outputs = r.Outputs[1:] }, WindowMissing},
		{"the late record counted", func(r *Run) { r.Outputs[0].Count = 3 }, WindowCount},
		{"a final row naming an input of another window", func(r *Run) { r.Outputs[0].Source = Input{"in", 0, 1} }, WindowCount},
		{"a final row naming the late input", func(r *Run) { r.Outputs[0].Source = Input{"in", 1, 2} }, WindowCount},
		{"a final row of a window that cannot have closed", func(r *Run) { r.Outputs = append(r.Outputs, finalRow(2, "b@20000", 1, 4)) }, WindowCount},
		{"the late record twice", func(r *Run) {
			o := r.Outputs[2]
			o.Offset = 1
			r.Outputs = append(r.Outputs, o)
		}, LateWrong},
		{"an input that cannot be late in the late topic", func(r *Run) {
			r.Outputs = append(r.Outputs, Output{Topic: "late", Offset: 1, Source: Input{"in", 1, 1}, Key: "b", Keyed: true, Committed: true, TxnEnd: -1})
		}, LateWrong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := hopWindowRun()
			tc.change(&r)
			rep := Check(r, hopWindowed)
			for _, a := range WindowAnomalies {
				want := 0
				if a == tc.want {
					want = 1
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
}
