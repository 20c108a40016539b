package check

import (
	"testing"
	"time"

	"github.com/streamproc/processor/record"
)

// windowRun is a windowed count (10 s tumbling, no grace, late topic
// "late") over six inputs of partition in/0, committed in full:
//
//	@0 a 1s, @1 a 5s: window a@0 (2); @2 b 12s closes a@0: b@10000 (1);
//	@3 a 3s: late; @4 a 25s closes b@10000; @5 b 26s: a@20000, b@20000
//	stay open.
//
// The outputs are a correct run's: final rows of a@0 and b@10000, and @3
// in the late topic.
func windowRun() Run {
	tp := record.TopicPartition{Topic: "in", Partition: 0}
	r := Run{Committed: map[record.TopicPartition]int64{tp: 6}, InputEnds: map[record.TopicPartition]int64{tp: 6},
		InputKeys: map[Input]string{}, InputTimes: map[Input]int64{}}
	for i, x := range []struct {
		key string
		ts  int64
	}{{"a", 1000}, {"a", 5000}, {"b", 12000}, {"a", 3000}, {"a", 25000}, {"b", 26000}} {
		in := Input{"in", 0, int64(i)}
		r.Inputs = append(r.Inputs, in)
		r.InputKeys[in], r.InputTimes[in] = x.key, x.ts
	}
	r.Outputs = []Output{
		finalRow(0, "a@0", 2, 1),
		finalRow(1, "b@10000", 1, 2),
		{Topic: "late", Offset: 0, Source: Input{"in", 0, 3}, Key: "a", Keyed: true, Committed: true, TxnEnd: -1},
	}
	return r
}

// finalRow is a committed final row at out/0@offset, of the input at
// in/0@src.
func finalRow(offset int64, key string, count, src int64) Output {
	return Output{Topic: "out", Offset: offset, Source: Input{"in", 0, src}, Key: key, Keyed: true, Count: count, CountOK: true,
		Committed: true, TxnEnd: -1}
}

var windowed = Options{ExpectAll: true, Windows: &Windows{Size: 10 * time.Second, LateTopic: "late"}}

// The windows check passes a correct run and catches each way a final
// row or a late record can be wrong.
func TestWindowsCheck(t *testing.T) {
	cases := []struct {
		name   string
		change func(r *Run)
		want   Anomaly
	}{
		{"clean", func(*Run) {}, ""},
		{"a duplicate final row", func(r *Run) { r.Outputs = append(r.Outputs, finalRow(2, "a@0", 2, 1)) }, WindowDuplicate},
		{"a final row missing", func(r *Run) { r.Outputs = append(r.Outputs[:1:1], r.Outputs[2]) }, WindowMissing},
		{"a wrong count", func(r *Run) { r.Outputs[1].Count = 2 }, WindowCount},
		{"the late record counted", func(r *Run) { r.Outputs[0].Count = 3 }, WindowCount},
		{"a final row of an open window", func(r *Run) { r.Outputs = append(r.Outputs, finalRow(2, "a@20000", 1, 4)) }, WindowCount},
		{"the late record not in the late topic", func(r *Run) { r.Outputs = r.Outputs[:2] }, LateWrong},
		{"the late record twice", func(r *Run) {
			o := r.Outputs[2]
			o.Offset = 1
			r.Outputs = append(r.Outputs, o)
		}, LateWrong},
		{"an input in time in the late topic", func(r *Run) {
			r.Outputs = append(r.Outputs, Output{Topic: "late", Offset: 1, Source: Input{"in", 0, 5}, Key: "b", Keyed: true, Committed: true, TxnEnd: -1})
		}, LateWrong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := windowRun()
			tc.change(&r)
			rep := Check(r, windowed)
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
	// Without a late topic the late record is dropped, and counted so.
	r := windowRun()
	r.Outputs = r.Outputs[:2]
	o := windowed
	o.Windows = &Windows{Size: 10 * time.Second}
	if rep := Check(r, o); !rep.Clean() || rep.Windows.Dropped != 1 || rep.Windows.Closed != 2 {
		t.Errorf("without a late topic: %v, %+v", rep.Counts, rep.Windows)
	}
}

// floorMs is the largest multiple of step at or below x, for x below,
// at and above 0, on and off the multiples.
func TestFloorMs(t *testing.T) {
	for _, step := range []int64{1, 3, 1000, 60_000} {
		for x := -3*step - 2; x <= 3*step+2; x++ {
			got := floorMs(x, step)
			if got%step != 0 || got > x || got+step <= x {
				t.Fatalf("floorMs(%d, %d) = %d: not the largest multiple of %d at or below %d", x, step, got, step, x)
			}
		}
	}
	for _, c := range []struct{ x, step, want int64 }{{-1, 1000, -1000}, {-1000, 1000, -1000}, {-1001, 1000, -2000}, {999, 1000, 0}, {1000, 1000, 1000}} {
		if got := floorMs(c.x, c.step); got != c.want {
			t.Errorf("floorMs(%d, %d) = %d, want %d", c.x, c.step, got, c.want)
		}
	}
}
