package check

import (
	"strconv"
	"testing"
	"time"

	"github.com/streamproc/processor/record"
)

// dedupeRun is a dedupe (WINDOW 10 s, GRACE 5 s, late topic "late") over
// seven inputs of in/0 and one of in/1, committed in full:
//
//	@0 id 1 at 1s, @1 id 2 at 2s: first; @2 id 1 at 4s: a duplicate;
//	@3 id 3 at 20s: first; @4 id 2 at 12s: late (3 s beyond the grace);
//	@5 id 1 at 16s: first again (its window ended at 11s); @6 id 3 at
//	19s: a duplicate (ahead of nothing: the window counts from 20s).
//	in/1@0 id 4 at 0.1s: first (its partition's own stream time).
//
// The outputs are a correct run's.
func dedupeRun() Run {
	p0, p1 := record.TopicPartition{Topic: "in", Partition: 0}, record.TopicPartition{Topic: "in", Partition: 1}
	r := Run{Committed: map[record.TopicPartition]int64{p0: 7, p1: 1}, InputEnds: map[record.TopicPartition]int64{p0: 7, p1: 1},
		InputKeys: map[Input]string{}, InputTimes: map[Input]int64{}}
	for i, x := range []struct {
		id string
		ts int64
	}{{"1", 1000}, {"2", 2000}, {"1", 4000}, {"3", 20000}, {"2", 12000}, {"1", 16000}, {"3", 19000}} {
		in := Input{"in", 0, int64(i)}
		r.Inputs = append(r.Inputs, in)
		r.InputKeys[in], r.InputTimes[in] = x.id, x.ts
	}
	in1 := Input{"in", 1, 0}
	r.Inputs = append(r.Inputs, in1)
	r.InputKeys[in1], r.InputTimes[in1] = "4", 100
	for i, src := range []Input{{"in", 0, 0}, {"in", 0, 1}, {"in", 0, 3}, {"in", 0, 5}, in1} {
		r.Outputs = append(r.Outputs, dedupeOut("out", int64(i), src))
	}
	r.Outputs = append(r.Outputs, dedupeOut("late", 0, Input{"in", 0, 4}))
	return r
}

// dedupeOut is a committed output at topic/0@offset of the input src.
func dedupeOut(topic string, offset int64, src Input) Output {
	return Output{Topic: topic, Offset: offset, Source: src, Key: "k" + strconv.FormatInt(src.Offset, 10), Keyed: true, Committed: true, TxnEnd: -1}
}

var deduped = Options{ExpectAll: true, Dedupe: &Dedupe{Window: 10 * time.Second, Grace: 5 * time.Second, LateTopic: "late"}}

// The dedupe check passes a correct run and catches a duplicate that
// passed, a first sighting lost or repeated, and a late record missing,
// repeated, passed on or in time.
func TestDedupeCheck(t *testing.T) {
	cases := []struct {
		name   string
		change func(r *Run)
		want   Anomaly
	}{
		{"clean", func(*Run) {}, ""},
		{"a duplicate passed", func(r *Run) { r.Outputs = append(r.Outputs, dedupeOut("out", 9, Input{"in", 0, 2})) }, DedupePassed},
		{"a duplicate ahead of its first passed", func(r *Run) { r.Outputs = append(r.Outputs, dedupeOut("out", 9, Input{"in", 0, 6})) }, DedupePassed},
		{"a first sighting lost", func(r *Run) { r.Outputs = append(r.Outputs[:3:3], r.Outputs[4:]...) }, DedupeMissing},
		{"a first sighting twice", func(r *Run) { r.Outputs = append(r.Outputs, dedupeOut("out", 9, Input{"in", 1, 0})) }, DedupeMissing},
		{"the late record not in the late topic", func(r *Run) { r.Outputs = r.Outputs[:5] }, LateWrong},
		{"the late record passed on instead", func(r *Run) { r.Outputs[5].Topic = "out"; r.Outputs[5].Offset = 9 }, LateWrong},
		{"an input in time in the late topic", func(r *Run) { r.Outputs = append(r.Outputs, dedupeOut("late", 1, Input{"in", 0, 6})) }, LateWrong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dedupeRun()
			tc.change(&r)
			rep := Check(r, deduped)
			for _, a := range DedupeAnomalies {
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
	r := dedupeRun()
	if rep := Check(r, deduped); rep.Dedupe == nil || *rep.Dedupe != (DedupeTotals{IDs: 4, Passed: 5, Duplicates: 2, Late: 1}) {
		t.Errorf("totals %+v", rep.Dedupe)
	}
	// Without a late topic the late record passes on.
	r.Outputs = nil
	for i, src := range []Input{{"in", 0, 0}, {"in", 0, 1}, {"in", 0, 3}, {"in", 0, 4}, {"in", 0, 5}, {"in", 1, 0}} {
		r.Outputs = append(r.Outputs, dedupeOut("out", int64(i), src))
	}
	o := deduped
	o.Dedupe = &Dedupe{Window: 10 * time.Second, Grace: 5 * time.Second}
	if rep := Check(r, o); !rep.Clean() {
		t.Errorf("without a late topic: %v %v", rep.Counts, rep.Examples)
	}
}
