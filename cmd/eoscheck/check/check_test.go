package check

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/record"
)

// fixture builds runs of an identity processor: input topic "in" with
// partitions 0 and 1 holding n records each; output partition = input
// partition, one committed transaction per input partition.
type fixture struct {
	inputs    []Input
	outputs   []Output
	committed map[record.TopicPartition]int64
	ends      map[record.TopicPartition]int64
	next      map[record.TopicPartition]int64 // next output offset per output partition
}

func tp(t string, p int32) record.TopicPartition {
	return record.TopicPartition{Topic: t, Partition: p}
}

func newFixture(n int64) *fixture {
	f := &fixture{
		committed: map[record.TopicPartition]int64{},
		ends:      map[record.TopicPartition]int64{},
		next:      map[record.TopicPartition]int64{},
	}
	for p := int32(0); p < 2; p++ {
		for o := int64(0); o < n; o++ {
			f.inputs = append(f.inputs, Input{"in", p, o})
		}
		f.committed[tp("in", p)] = n
		f.ends[tp("in", p)] = n
	}
	return f
}

// write appends outputs for the given sources to out/<partition> as one
// transaction ending with a marker; committed says whether it committed.
func (f *fixture) write(part int32, committed bool, srcs ...Input) {
	otp := tp("out", part)
	marker := f.next[otp] + int64(len(srcs))
	for _, s := range srcs {
		f.outputs = append(f.outputs, Output{
			Topic: "out", Partition: part, Offset: f.next[otp],
			Source: s, Committed: committed, Aborted: !committed, TxnEnd: marker,
		})
		f.next[otp]++
	}
	f.next[otp]++ // the marker
}

// identity writes one committed output per input, per input partition.
func (f *fixture) identity() *fixture {
	for p := int32(0); p < 2; p++ {
		var srcs []Input
		for _, in := range f.inputs {
			if in.Partition == p {
				srcs = append(srcs, in)
			}
		}
		f.write(p, true, srcs...)
	}
	return f
}

func (f *fixture) run() Run {
	return Run{Inputs: f.inputs, Outputs: f.outputs, Committed: f.committed, InputEnds: f.ends}
}

var strict = Options{OneToOne: true, ExpectAll: true, TransactionTimeout: 3 * time.Second, StuckAfter: 3 * time.Second}

// expect asserts the report's counts: want lists the non-zero ones.
func expect(t *testing.T, rep Report, want map[Anomaly]int) {
	t.Helper()
	for _, a := range Anomalies {
		if rep.Counts[a] != want[a] {
			t.Errorf("%s: got %d, want %d", a, rep.Counts[a], want[a])
		}
	}
	if got := rep.Clean(); got != (len(want) == 0) {
		t.Errorf("Clean() = %v with %v", got, rep.Counts)
	}
	if t.Failed() {
		t.Logf("report:\n%s%v", rep.Table(), rep.Examples)
	}
}

// expectDetails checks, for each anomaly of examples, that its first
// example holds that text, and that each class of totals has those totals.
func expectDetails(t *testing.T, rep Report, examples map[Anomaly]string, totals map[Class]ClassTotals) {
	t.Helper()
	for a, ex := range examples {
		if len(rep.Examples[a]) == 0 || !strings.Contains(rep.Examples[a][0], ex) {
			t.Errorf("%s examples %.300q, want the first to hold %q", a, rep.Examples[a], ex)
		}
	}
	for c, want := range totals {
		if got := rep.Classes[c]; got == nil || *got != want {
			t.Errorf("class %s totals %+v, want %+v", c, got, want)
		}
	}
}

func in(p int32, o int64) Input { return Input{"in", p, o} }

func TestCleanRun(t *testing.T) {
	f := newFixture(10).identity()
	rep := Check(f.run(), strict)
	expect(t, rep, nil)
	if rep.Inputs != 20 || rep.OutputsVisible != 20 || rep.OutputsAborted != 0 || rep.OutputsPending != 0 {
		t.Errorf("totals: %+v", rep)
	}
	if !strings.Contains(rep.Table(), "CLEAN") {
		t.Errorf("table has no verdict:\n%s", rep.Table())
	}
}

func TestAbortedThenReprocessedIsClean(t *testing.T) {
	f := newFixture(10)
	// An attempt at in/0@0..4 aborts; its outputs stay in the log,
	// invisible; the retry commits everything.
	f.write(0, false, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4))
	f.identity()
	rep := Check(f.run(), strict)
	expect(t, rep, nil)
	if rep.OutputsAborted != 5 || rep.OutputsVisible != 20 {
		t.Errorf("totals: aborted %d visible %d", rep.OutputsAborted, rep.OutputsVisible)
	}
}

func TestDuplicate(t *testing.T) {
	f := newFixture(10).identity()
	f.write(0, true, in(0, 3)) // committed twice
	rep := Check(f.run(), strict)
	expect(t, rep, map[Anomaly]int{Duplicate: 1})
	if ex := rep.Examples[Duplicate]; len(ex) != 1 || !strings.Contains(ex[0], "in/0@3 has 2 visible outputs") {
		t.Errorf("example: %q", ex)
	}
}

// At least once, an input written twice is expected: counted, not an
// anomaly. A lost input still is.
func TestAtLeastOnceCountsRepeats(t *testing.T) {
	alo := strict
	alo.AtLeastOnce = true
	f := newFixture(10).identity()
	f.write(0, true, in(0, 3), in(0, 4)) // a batch written again after a crash
	rep := Check(f.run(), alo)
	expect(t, rep, nil)
	if rep.Repeated != 2 || !strings.Contains(rep.Table(), "inputs repeated  2 (written more than once, expected at least once)") {
		t.Errorf("Repeated = %d; table:\n%s", rep.Repeated, rep.Table())
	}
	if rep := Check(f.run(), strict); rep.Counts[Duplicate] != 2 || rep.Repeated != 0 {
		t.Errorf("exactly once: %d duplicates, %d repeated; want 2 and 0", rep.Counts[Duplicate], rep.Repeated)
	}

	lost := newFixture(10)
	lost.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4), in(0, 5), in(0, 6), in(0, 7), in(0, 8), in(0, 9), in(0, 9))
	lost.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 8), in(1, 9))
	rep = Check(lost.run(), alo)
	expect(t, rep, map[Anomaly]int{Lost: 1})
	if rep.Repeated != 1 {
		t.Errorf("Repeated = %d, want 1", rep.Repeated)
	}
}

func TestLost(t *testing.T) {
	f := newFixture(10)
	f.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4), in(0, 5), in(0, 6), in(0, 7), in(0, 8), in(0, 9))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 8), in(1, 9)) // no in/1@7
	rep := Check(f.run(), strict)
	expect(t, rep, map[Anomaly]int{Lost: 1})
	// A record dropped by PROCESSOR_ON_ERROR=skip looks just the same.
	if ex := rep.Examples[Lost]; len(ex) != 1 || ex[0] != "in/1@7 is below the committed offset 10 but has no visible output (lost or skipped)" {
		t.Errorf("example: %q", ex)
	}

	// Without one-to-one, a missing output is a filter at work.
	expect(t, Check(f.run(), Options{ExpectAll: true}), nil)
}

func TestAbortedRead(t *testing.T) {
	f := newFixture(10)
	f.write(0, false, in(0, 2))
	f.outputs[0].Committed = true // a read_committed reader saw the aborted attempt
	f.identity()
	rep := Check(f.run(), strict)
	expect(t, rep, map[Anomaly]int{AbortedRead: 1})
	if rep.OutputsVisible != 21 || rep.OutputsAborted != 1 {
		t.Errorf("totals: visible %d aborted %d", rep.OutputsVisible, rep.OutputsAborted)
	}
}

func TestTornTransaction(t *testing.T) {
	// Outputs of in/0@5..9 are visible but the group's offset did not
	// advance past 5: outputs and offsets were not atomic.
	f := newFixture(10).identity()
	f.committed[tp("in", 0)] = 5
	expect(t, Check(f.run(), strict), map[Anomaly]int{OffsetMismatch: 5})
	expect(t, Check(f.run(), Options{OneToOne: true}), map[Anomaly]int{OffsetMismatch: 5})
}

func TestCommittedBeyondEnd(t *testing.T) {
	f := newFixture(10).identity()
	f.committed[tp("in", 1)] = 12
	expect(t, Check(f.run(), strict), map[Anomaly]int{OffsetMismatch: 1})
}

func TestReorder(t *testing.T) {
	f := newFixture(10)
	f.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 4), in(0, 3), in(0, 5), in(0, 6), in(0, 7), in(0, 8), in(0, 9))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9))
	expect(t, Check(f.run(), strict), map[Anomaly]int{Order: 1})
}

func TestReorderAcrossOutputPartitionsIsFine(t *testing.T) {
	// Keyed output: in/0's records spread over two output partitions, in
	// order within each. The partitions' interleaving does not matter.
	f := newFixture(4)
	f.write(1, true, in(0, 1), in(0, 3), in(1, 0), in(1, 1), in(1, 2), in(1, 3))
	f.write(0, true, in(0, 0), in(0, 2))
	expect(t, Check(f.run(), strict), nil)
}

// keyed gives the outputs keys: key k<offset%3> of their source, null
// for the sources at offsets 9 and above.
func (f *fixture) keyed() *fixture {
	for i := range f.outputs {
		o := &f.outputs[i]
		if o.Source.Offset < 9 {
			o.Key, o.Keyed = "k"+strconv.Itoa(int(o.Source.Offset%3)), true
		}
	}
	return f
}

func TestKeyOrder(t *testing.T) {
	f := newFixture(12).identity().keyed()
	expect(t, Check(f.run(), strict), nil)

	// Keys k0 (offsets 0, 3, 6) and k1 (1, 4, 7) each in order in out/0,
	// k0 before k1 where the partition's order does not hold; null-key
	// records of offsets 9 to 11 out of order are not judged by key.
	f = newFixture(12)
	f.write(0, true, in(0, 0), in(0, 3), in(0, 6), in(0, 1), in(0, 4), in(0, 7), in(0, 2), in(0, 5), in(0, 8), in(0, 11), in(0, 10), in(0, 9))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9), in(1, 10), in(1, 11))
	rep := Check(f.keyed().run(), strict)
	if rep.Counts[KeyOrder] != 0 || rep.Counts[Order] == 0 {
		t.Errorf("per-key order kept, partition order not: counts %v, want order only", rep.Counts)
	}

	// k1's outputs out of order.
	f = newFixture(12)
	f.write(0, true, in(0, 0), in(0, 4), in(0, 2), in(0, 3), in(0, 1), in(0, 5), in(0, 6), in(0, 7), in(0, 8), in(0, 9), in(0, 10), in(0, 11))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9), in(1, 10), in(1, 11))
	rep = Check(f.keyed().run(), strict)
	if rep.Counts[KeyOrder] != 1 {
		t.Errorf("k1 out of order: counts %v, want key-order 1", rep.Counts)
	}

	// in/0's k2 outputs split over out/0 and out/1: their order cannot be
	// judged.
	f = newFixture(12)
	f.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4), in(0, 6), in(0, 7), in(0, 8), in(0, 9), in(0, 10), in(0, 11))
	f.write(1, true, in(0, 5), in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9), in(1, 10), in(1, 11))
	rep = Check(f.keyed().run(), strict)
	if rep.Counts[KeyOrder] == 0 {
		t.Errorf("k2 in two output partitions: counts %v, want key-order", rep.Counts)
	}
}

func TestUncommitted(t *testing.T) {
	f := newFixture(10)
	f.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4), in(0, 5), in(0, 6), in(0, 7))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9))
	f.committed[tp("in", 0)] = 8
	expect(t, Check(f.run(), strict), map[Anomaly]int{Uncommitted: 2})
	expect(t, Check(f.run(), Options{OneToOne: true}), nil)
}

func TestNoCommittedOffsets(t *testing.T) {
	f := newFixture(3)
	f.committed = map[record.TopicPartition]int64{}
	expect(t, Check(f.run(), strict), map[Anomaly]int{Uncommitted: 6})
}

func TestTransactionalInputCaughtUp(t *testing.T) {
	// in/0 is another processor's output: data at 0..8, a commit marker
	// at 9, log end 10. A caught-up group committed 9 (the next record
	// it would read) or 10 (a client that skipped the marker).
	f := newFixture(9).identity()
	f.ends[tp("in", 0)] = 10
	f.committed[tp("in", 0)] = 9
	expect(t, Check(f.run(), strict), nil)
	f.committed[tp("in", 0)] = 10
	expect(t, Check(f.run(), strict), nil)
	f.committed[tp("in", 0)] = 11
	expect(t, Check(f.run(), strict), map[Anomaly]int{OffsetMismatch: 1})

	// Samples of the caught-up state over a long time are not stuck:
	// the one offset of lag is a marker.
	f.committed[tp("in", 0)] = 9
	r := f.run()
	t0 := time.Unix(1000, 0)
	for i := range 10 {
		r.Samples = append(r.Samples, Sample{
			At:        t0.Add(time.Duration(i) * time.Second),
			Stable:    map[record.TopicPartition]int64{tp("in", 0): 10, tp("in", 1): 9},
			High:      map[record.TopicPartition]int64{tp("in", 0): 10, tp("in", 1): 9},
			Committed: maps.Clone(f.committed),
		})
	}
	expect(t, Check(r, strict), nil)
}

func TestPhantom(t *testing.T) {
	f := newFixture(5).identity()
	f.outputs = append(f.outputs,
		Output{Topic: "out", Partition: 0, Offset: 100, Committed: true, TxnEnd: 101},                           // no lineage
		Output{Topic: "out", Partition: 0, Offset: 101, Source: in(0, 50), Committed: true, TxnEnd: 102},        // no such input
		Output{Topic: "out", Partition: 0, Offset: 102, Source: Input{"x", 0, 1}, Committed: true, TxnEnd: 103}) // not an input topic
	expect(t, Check(f.run(), strict), map[Anomaly]int{Phantom: 3})
}

func TestPendingIsNotLost(t *testing.T) {
	// The last transaction is open: its outputs are not visible yet, and
	// the group's offset has not moved past its inputs.
	f := newFixture(10)
	f.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4), in(0, 5), in(0, 6), in(0, 7))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9))
	f.outputs = append(f.outputs,
		Output{Topic: "out", Partition: 0, Offset: 9, Source: in(0, 8), Pending: true, TxnEnd: -1},
		Output{Topic: "out", Partition: 0, Offset: 10, Source: in(0, 9), Pending: true, TxnEnd: -1})
	f.committed[tp("in", 0)] = 8
	rep := Check(f.run(), Options{OneToOne: true})
	expect(t, rep, nil)
	if rep.OutputsPending != 2 {
		t.Errorf("pending = %d", rep.OutputsPending)
	}
	// Expecting everything committed, the two inputs are not done yet.
	expect(t, Check(f.run(), strict), map[Anomaly]int{Uncommitted: 2})
}

func TestCommittedButInvisibleIsLost(t *testing.T) {
	// A record with a commit marker that read_committed did not deliver.
	f := newFixture(3).identity()
	f.outputs[1].Committed = false
	expect(t, Check(f.run(), strict), map[Anomaly]int{Lost: 1})
}

func TestLiveSnapshotBrackets(t *testing.T) {
	// The group committed in/0 up to 10 between the two offset reads:
	// the outputs of 5..9 were visible, so the later offsets judge them,
	// and the earlier offsets judge what must already be visible.
	f := newFixture(10).identity()
	r := f.run()
	r.CommittedEarlier = maps.Clone(f.committed)
	r.CommittedEarlier[tp("in", 0)] = 5
	expect(t, Check(r, strict), nil)

	// Outputs of 8 and 9 not yet visible when read: not lost, because the
	// group had not committed them when the outputs were read.
	f = newFixture(10)
	f.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4), in(0, 5), in(0, 6), in(0, 7))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9))
	r = f.run()
	r.CommittedEarlier = maps.Clone(f.committed)
	r.CommittedEarlier[tp("in", 0)] = 8
	expect(t, Check(r, Options{OneToOne: true}), nil)
}

func TestFlatMap(t *testing.T) {
	opts := Options{ExpectAll: true}
	f := newFixture(4)
	// in/0@1 filtered out; in/0@2 expanded to three records.
	f.write(0, true, in(0, 0), in(0, 2), in(0, 2), in(0, 2), in(0, 3))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3))
	expect(t, Check(f.run(), opts), nil)

	// in/0@3's outputs committed again in a later transaction.
	f.write(0, true, in(0, 3), in(0, 3))
	expect(t, Check(f.run(), opts), map[Anomaly]int{Duplicate: 1})
}

func samples(t0 time.Time, n int, every time.Duration, fn func(i int, s *Sample)) []Sample {
	var out []Sample
	for i := range n {
		s := Sample{
			At:        t0.Add(time.Duration(i) * every),
			Stable:    map[record.TopicPartition]int64{},
			High:      map[record.TopicPartition]int64{},
			Committed: map[record.TopicPartition]int64{},
		}
		fn(i, &s)
		out = append(out, s)
	}
	return out
}

func TestHanging(t *testing.T) {
	t0 := time.Unix(1000, 0)
	f := newFixture(10).identity()
	base := func(i int, s *Sample) {
		maps.Copy(s.Committed, f.committed)
		for p := int32(0); p < 2; p++ {
			s.Stable[tp("in", p)], s.High[tp("in", p)] = 10, 10
			s.Stable[tp("out", p)], s.High[tp("out", p)] = 11, 11
		}
	}

	// out/1: a transaction opened at 11 and never ended: the last stable
	// offset sits at 11 for 5 s, longer than the 3 s timeout.
	r := f.run()
	r.Samples = samples(t0, 6, time.Second, func(i int, s *Sample) {
		base(i, s)
		s.High[tp("out", 1)] = 14
	})
	rep := Check(r, strict)
	expect(t, rep, map[Anomaly]int{Hanging: 1})
	if ex := rep.Examples[Hanging]; len(ex) != 1 || !strings.HasPrefix(ex[0], "out/1: last stable offset stayed at 11") {
		t.Errorf("example: %q", ex)
	}
	if rep.Samples != 6 || rep.Window != 5*time.Second {
		t.Errorf("samples %d window %s", rep.Samples, rep.Window)
	}

	// Open for 3 s, within the timeout.
	r.Samples = samples(t0, 6, time.Second, func(i int, s *Sample) {
		base(i, s)
		if i >= 2 {
			s.High[tp("out", 1)] = 14
		}
	})
	expect(t, Check(r, strict), nil)

	// A busy topic: always a transaction open, but the stable offset keeps
	// moving.
	r.Samples = samples(t0, 10, time.Second, func(i int, s *Sample) {
		base(i, s)
		s.Stable[tp("out", 0)] = 11 + int64(i)*10
		s.High[tp("out", 0)] = 15 + int64(i)*10
	})
	expect(t, Check(r, strict), nil)

	// One sample says nothing about time.
	r.Samples = r.Samples[:1]
	r.Samples[0].High[tp("out", 0)] = 1000
	expect(t, Check(r, strict), nil)
}

func TestStuck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	f := newFixture(10)
	f.write(0, true, in(0, 0), in(0, 1), in(0, 2), in(0, 3), in(0, 4))
	f.write(1, true, in(1, 0), in(1, 1), in(1, 2), in(1, 3), in(1, 4), in(1, 5), in(1, 6), in(1, 7), in(1, 8), in(1, 9))
	f.committed[tp("in", 0)] = 5
	opts := Options{OneToOne: true, StuckAfter: 3 * time.Second}

	// in/0 has 5 records to read and the group does not move for 4 s.
	r := f.run()
	r.Samples = samples(t0, 5, time.Second, func(i int, s *Sample) {
		maps.Copy(s.Committed, f.committed)
		s.Stable[tp("in", 0)], s.High[tp("in", 0)] = 10, 10
		s.Stable[tp("in", 1)], s.High[tp("in", 1)] = 10, 10
	})
	rep := Check(r, opts)
	expect(t, rep, map[Anomaly]int{Stuck: 1})
	if ex := rep.Examples[Stuck]; len(ex) != 1 || !strings.HasPrefix(ex[0], "in/0: committed offset stayed at 5") {
		t.Errorf("example: %q", ex)
	}

	// The group moves every sample: slow, not stuck.
	r.Samples = samples(t0, 5, time.Second, func(i int, s *Sample) {
		maps.Copy(s.Committed, f.committed)
		s.Committed[tp("in", 0)] = int64(1 + i)
		s.Stable[tp("in", 0)], s.High[tp("in", 0)] = 10, 10
		s.Stable[tp("in", 1)], s.High[tp("in", 1)] = 10, 10
	})
	expect(t, Check(r, opts), nil)
}

func TestTableFormat(t *testing.T) {
	f := newFixture(10).identity()
	f.write(0, true, in(0, 3))
	got := Check(f.run(), strict).Table()
	want := `ANOMALY          COUNT  EXAMPLE
duplicate        1      in/0@3 has 2 visible outputs: out/0@3, out/0@11
lost             0      -
aborted-read     0      -
order            0      -
key-order        0      -
offset-mismatch  0      -
uncommitted      0      -
phantom          0      -
hanging          0      -
stuck            0      -
dead-letter      0      -
inputs           20
outputs visible  21
outputs aborted  0
outputs pending  0
samples          0 over 0s
result: 1 ANOMALIES (duplicate 1)
`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// deadLetter returns a dead letter of src at dlq/<part>@off, committed or
// aborted.
func deadLetter(part int32, off int64, src Input, committed bool, msg string) DeadLetterRecord {
	return DeadLetterRecord{
		Output: Output{Topic: "dlq", Partition: part, Offset: off, Source: src, Committed: committed, Aborted: !committed, TxnEnd: off + 1},
		Error:  msg,
	}
}

// allBut writes one committed output per input except those in skip, per
// input partition.
func (f *fixture) allBut(skip ...Input) *fixture {
	for p := int32(0); p < 2; p++ {
		var srcs []Input
		for _, in := range f.inputs {
			if in.Partition == p && !slices.Contains(skip, in) {
				srcs = append(srcs, in)
			}
		}
		f.write(p, true, srcs...)
	}
	return f
}

func TestDeadLetterCleanRun(t *testing.T) {
	// No dead letters at all, and a dead letter whose transaction aborted
	// (its input was then processed normally): clean.
	f := newFixture(10).identity()
	r := f.run()
	expect(t, Check(r, strict), nil)
	r.DeadLetters = []DeadLetterRecord{deadLetter(0, 0, in(0, 4), false, "context canceled")}
	expect(t, Check(r, strict), nil)
}

func TestDeadLetter(t *testing.T) {
	// in/1@7 was dead-lettered instead of written: one dead-letter, and
	// not lost, since the dead letter accounts for it.
	f := newFixture(10).allBut(in(1, 7))
	r := f.run()
	r.DeadLetters = []DeadLetterRecord{deadLetter(2, 5, in(1, 7), true, "jq: context canceled")}
	rep := Check(r, strict)
	expect(t, rep, map[Anomaly]int{DeadLetter: 1})
	want := `dlq/2@5 is a dead letter of in/1@7, processor.error "jq: context canceled"`
	if ex := rep.Examples[DeadLetter]; len(ex) != 1 || ex[0] != want {
		t.Errorf("example: %q, want %q", ex, want)
	}
	if !strings.Contains(rep.Table(), "dead-letter      1      "+want+"\n") || !strings.HasSuffix(rep.Table(), "result: 1 ANOMALIES (dead-letter 1)\n") {
		t.Errorf("table:\n%s", rep.Table())
	}

	// Its dead letter still in an open transaction: neither a dead letter
	// yet nor lost.
	r.DeadLetters[0].Committed, r.DeadLetters[0].Pending = false, true
	expect(t, Check(r, Options{OneToOne: true}), nil)
}

func TestDeadLetterAndOutput(t *testing.T) {
	// in/0@3 has a visible output and a visible dead letter: processed
	// twice. Two dead letters of one input are a duplicate too, in either
	// mode.
	f := newFixture(10).identity()
	r := f.run()
	r.DeadLetters = []DeadLetterRecord{deadLetter(0, 0, in(0, 3), true, "boom")}
	rep := Check(r, strict)
	expect(t, rep, map[Anomaly]int{DeadLetter: 1, Duplicate: 1})
	if ex := rep.Examples[Duplicate]; len(ex) != 1 || ex[0] != "in/0@3 has 1 visible outputs and 1 dead letters: out/0@3, dlq/0@0" {
		t.Errorf("example: %q", ex)
	}

	f = newFixture(10).allBut(in(0, 3))
	r = f.run()
	r.DeadLetters = []DeadLetterRecord{deadLetter(0, 0, in(0, 3), true, "boom"), deadLetter(0, 2, in(0, 3), true, "boom")}
	expect(t, Check(r, strict), map[Anomaly]int{DeadLetter: 2, Duplicate: 1})
	expect(t, Check(r, Options{ExpectAll: true}), map[Anomaly]int{DeadLetter: 2, Duplicate: 1})
}

func TestDeadLetterPastCommittedOffset(t *testing.T) {
	// A dead letter visible for an input the group has not committed
	// past: dead letters and offsets were not committed together.
	f := newFixture(10).allBut(in(0, 9))
	f.committed[tp("in", 0)] = 9
	r := f.run()
	r.DeadLetters = []DeadLetterRecord{deadLetter(0, 0, in(0, 9), true, "boom")}
	expect(t, Check(r, strict), map[Anomaly]int{DeadLetter: 1, OffsetMismatch: 1})
}

func TestDeadLetterWithoutLineage(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	f := newFixture(10).identity()
	r := f.run()
	r.DeadLetters = []DeadLetterRecord{
		deadLetter(0, 0, Input{}, true, ""),
		deadLetter(0, 2, Input{"x", 0, 1}, true, long),
	}
	rep := Check(r, strict)
	expect(t, rep, map[Anomaly]int{DeadLetter: 2})
	ex := rep.Examples[DeadLetter]
	if len(ex) != 2 || ex[0] != "dlq/0@0 is a dead letter without valid processor.source or processor.source.* headers, processor.error missing" {
		t.Fatalf("examples: %q", ex)
	}
	if !strings.HasPrefix(ex[1], "dlq/0@2 is a dead letter claiming source x/0@1, which is not an input record, processor.error \"éé") ||
		!strings.HasSuffix(ex[1], "é...\"") || len(ex[1]) > 300 {
		t.Errorf("example: %q", ex[1])
	}
}

func TestDeadLetterVisibleButAborted(t *testing.T) {
	f := newFixture(10).allBut(in(0, 3))
	r := f.run()
	d := deadLetter(0, 0, in(0, 3), false, "boom")
	d.Committed = true // a read_committed reader saw an aborted dead letter
	r.DeadLetters = []DeadLetterRecord{d}
	expect(t, Check(r, strict), map[Anomaly]int{DeadLetter: 1, AbortedRead: 1, Lost: 1})
}

func TestTruncateError(t *testing.T) {
	if got := TruncateError("short"); got != "short" {
		t.Errorf("short: %q", got)
	}
	s := strings.Repeat("a", MaxErrorLen-1) + "€" + "tail" // the cut falls inside the euro sign
	got := TruncateError(s)
	if got != strings.Repeat("a", MaxErrorLen-1)+"..." {
		t.Errorf("cut: %q", got)
	}
}

// poisonMarks marks in/0@1 notjson and in/1@2 nearlimit.
var poisonMarks = map[Input]Mark{in(0, 1): {Class: NotJSON}, in(1, 2): {Class: NearLimit}}

func TestPoisonJudgements(t *testing.T) {
	skipping := strict
	skipping.Skipping = true
	notJSONDead := deadLetter(0, 0, in(0, 1), true, "transform jq: the value is not JSON")
	for _, tc := range []struct {
		name    string
		opts    Options
		skip    []Input            // inputs without output
		dead    []DeadLetterRecord // visible dead letters
		want    map[Anomaly]int
		example map[Anomaly]string // a substring of the first example
		totals  map[Class]ClassTotals
	}{
		{name: "each as its class wants", opts: strict, skip: []Input{in(0, 1)}, dead: []DeadLetterRecord{notJSONDead},
			totals: map[Class]ClassTotals{NotJSON: {Inputs: 1, DeadLetters: 1}, NearLimit: {Inputs: 1, Outputs: 1}}},
		{name: "notjson skipped by policy", opts: skipping, skip: []Input{in(0, 1)},
			totals: map[Class]ClassTotals{NotJSON: {Inputs: 1, Skipped: 1}, NearLimit: {Inputs: 1, Outputs: 1}}},
		{name: "notjson missing without skip instances", opts: strict, skip: []Input{in(0, 1)},
			want:    map[Anomaly]int{Lost: 1},
			example: map[Anomaly]string{Lost: "notjson input in/0@1 is below the committed offset 5 but has no visible dead letter"}},
		{name: "notjson passed the chain", opts: strict,
			want:    map[Anomaly]int{PoisonPassed: 1},
			example: map[Anomaly]string{PoisonPassed: "notjson input in/0@1, which must fail the chain, has visible output out/0@1"},
			totals:  map[Class]ClassTotals{NotJSON: {Inputs: 1, Outputs: 1}, NearLimit: {Inputs: 1, Outputs: 1}}},
		{name: "notjson dead-lettered twice", opts: skipping, skip: []Input{in(0, 1)},
			dead: []DeadLetterRecord{notJSONDead, deadLetter(0, 2, in(0, 1), true, "x")}, want: map[Anomaly]int{Duplicate: 1}},
		{name: "nearlimit dead-lettered", opts: skipping, skip: []Input{in(0, 1), in(1, 2)},
			dead:    []DeadLetterRecord{notJSONDead, deadLetter(1, 0, in(1, 2), true, "MESSAGE_TOO_LARGE")},
			want:    map[Anomaly]int{DeadLetter: 1},
			example: map[Anomaly]string{DeadLetter: `dlq/1@0 is a dead letter of in/1@2, processor.error "MESSAGE_TOO_LARGE"`},
			totals:  map[Class]ClassTotals{NotJSON: {Inputs: 1, DeadLetters: 1}, NearLimit: {Inputs: 1, DeadLetters: 1}}},
		{name: "nearlimit missing, skip instances or not", opts: skipping, skip: []Input{in(0, 1), in(1, 2)}, dead: []DeadLetterRecord{notJSONDead},
			want:    map[Anomaly]int{Lost: 1},
			example: map[Anomaly]string{Lost: "nearlimit input in/1@2 is below the committed offset 5 but has no visible output"}},
		{name: "ordinary missing, skip instances or not", opts: skipping, skip: []Input{in(0, 1), in(0, 4)}, dead: []DeadLetterRecord{notJSONDead},
			want: map[Anomaly]int{Lost: 1}, example: map[Anomaly]string{Lost: "in/0@4 is below the committed offset 5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(5).allBut(tc.skip...)
			r := f.run()
			r.Marks, r.DeadLetters = poisonMarks, tc.dead
			rep := Check(r, tc.opts)
			expect(t, rep, tc.want)
			expectDetails(t, rep, tc.example, tc.totals)
		})
	}
}

func TestPoisonTable(t *testing.T) {
	f := newFixture(5).allBut(in(0, 1))
	r := f.run()
	r.Marks = poisonMarks
	r.DeadLetters = []DeadLetterRecord{deadLetter(0, 0, in(0, 1), true, "x")}
	got := Check(r, strict).Table()
	for _, want := range []string{
		"\npoison-passed     0      -\n",
		"\npoison notjson    1 inputs: 0 outputs, 1 dead letters, 0 skipped by policy\n",
		"\npoison nearlimit  1 inputs: 1 outputs, 0 dead letters, 0 skipped by policy\n",
		"result: CLEAN\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in the table:\n%s", want, got)
		}
	}
}

func TestMarkOf(t *testing.T) {
	big := "1" + strings.Repeat("7", 139_999)
	for _, tc := range []struct {
		key, value string
		want       Mark
	}{
		{"k7", `{"key":"k7","seq":7}`, Mark{}},
		{PoisonKey(NotJSON, 17), "not json 17", Mark{Class: NotJSON}},
		{PoisonKey(NearLimit, 3), `{"pad":"xyz"}`, Mark{Class: NearLimit}},
		{PoisonKey(JSONBRefused, 4), `{"key":"poison-jsonb-4","seq":4,"poison":` + big + `}`, Mark{Class: JSONBRefused, Payload: []byte(big)}},
		{PoisonKey(JSONBRefused, 5), `{"poison":"\ud800x"}`, Mark{Class: JSONBRefused, Payload: []byte(`"\ud800x"`)}},
		{PoisonKey(JSONBRefused, 6), `not an object`, Mark{Class: JSONBRefused}},
		{"poison-other-1", `x`, Mark{}},
	} {
		got := MarkOf([]byte(tc.key), []byte(tc.value))
		if got.Class != tc.want.Class || string(got.Payload) != string(tc.want.Payload) {
			t.Errorf("MarkOf(%q, %.30q) = %v %.30q, want %v %.30q", tc.key, tc.value, got.Class, got.Payload, tc.want.Class, tc.want.Payload)
		}
	}
	if k := PoisonKey(NotJSON, 17); k != "poison-notjson-17" {
		t.Errorf("PoisonKey = %q", k)
	}
}
