package check

import (
	"testing"

	"github.com/streamproc/processor/record"
)

// TestReplayed: with the replay group's offsets (Run.Replayed), a dead
// letter below them counts for nothing: its input is judged by its
// outputs, the replay's with the main run's, exactly once together; a
// dead letter above them (one that failed again) accounts for its input
// as ever.
func TestReplayed(t *testing.T) {
	dead := []DeadLetterRecord{
		deadLetter(0, 0, in(0, 1), true, "bad"), // replayed: in/0@1 has its output from the replay
		deadLetter(0, 1, in(0, 2), true, "bad"), // replayed, failed again: the next one
		deadLetter(0, 2, in(0, 2), true, "still bad"),
	}
	for _, tc := range []struct {
		name     string
		replayed map[record.TopicPartition]int64
		extra    []Input // more outputs, committed, to partition 0 after the others
		skip     bool    // in/0@1 has no output before extra
		want     map[Anomaly]int
	}{
		{name: "replayed once each", replayed: map[record.TopicPartition]int64{tp("dlq", 0): 2}, want: map[Anomaly]int{DeadLetter: 1}},
		{name: "a replay's output twice", replayed: map[record.TopicPartition]int64{tp("dlq", 0): 2}, extra: []Input{in(0, 1)},
			want: map[Anomaly]int{DeadLetter: 1, Duplicate: 1}},
		{name: "a replay's output after later inputs' is in order", replayed: map[record.TopicPartition]int64{tp("dlq", 0): 1},
			skip: true, extra: []Input{in(0, 1)}, want: map[Anomaly]int{DeadLetter: 2, Duplicate: 1}},
		{name: "out of order without a replay", skip: true, extra: []Input{in(0, 1)},
			want: map[Anomaly]int{DeadLetter: 3, Duplicate: 2, Order: 1}},
		{name: "without the replay group", want: map[Anomaly]int{DeadLetter: 3, Duplicate: 2}},
		{name: "a replayed input without output", replayed: map[record.TopicPartition]int64{tp("dlq", 0): 3},
			want: map[Anomaly]int{Lost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(5).allBut(in(0, 2))
			if tc.skip {
				f = newFixture(5).allBut(in(0, 1), in(0, 2))
			}
			if tc.extra != nil {
				f.write(0, true, tc.extra...)
			}
			r := f.run()
			r.DeadLetters, r.Replayed = dead, tc.replayed
			rep := Check(r, strict)
			expect(t, rep, tc.want)
			if want := len(tc.replayed) * int(tc.replayed[tp("dlq", 0)]); rep.Replayed != want {
				t.Errorf("Replayed = %d, want %d", rep.Replayed, want)
			}
		})
	}
}
