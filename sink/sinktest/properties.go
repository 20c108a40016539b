package sinktest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// The properties Run checks, one function each.

// offsetsRoundTrip: an empty destination stores no offsets; a committed
// batch's offset updates are what Offsets returns afterwards (of every
// partition, or of those asked for), and the next batch starts from
// them; its rows and dead letters are all written, once; a batch of
// offsets alone moves them.
func offsetsRoundTrip(t testing.TB, d Target) {
	wantOffsets(t, d, map[record.TopicPartition]int64{})
	wantWritten(t, d)
	first := &sink.Batch{
		Rows:        append(rowsOf(in0, 0, 4), rowsOf(other, 10, 12)...),
		DeadLetters: []sink.DeadLetter{deadLetter(in1, 0)},
		Offsets:     []sink.OffsetUpdate{update(in0, -1, 5), update(in1, -1, 1), update(other, -1, 12)},
	}
	mustCommit(t, d, first)
	wantOffsets(t, d, map[record.TopicPartition]int64{in0: 5, in1: 1, other: 12})
	second := &sink.Batch{Rows: rowsOf(in0, 5, 9), Offsets: []sink.OffsetUpdate{update(in0, 5, 9)}}
	mustCommit(t, d, second)
	wantOffsets(t, d, map[record.TopicPartition]int64{in0: 9, in1: 1, other: 12})
	// Offsets alone: records that had no outputs (filtered) move them.
	third := &sink.Batch{Offsets: []sink.OffsetUpdate{update(in1, 1, 40), update(other, 12, 13)}}
	mustCommit(t, d, third)
	wantOffsets(t, d, map[record.TopicPartition]int64{in0: 9, in1: 40, other: 13})
	wantWritten(t, d, first, second, third)
}

// staleExpectationIsFenced: an offset update that does not start from
// what is stored (a lower offset, none when one is stored, one when none
// is) fails the whole batch with a *sink.FencedError naming exactly the
// partitions at fault, in order, writes nothing, and is not retriable;
// the destination then takes the batch that starts from what it stores.
func staleExpectationIsFenced(t testing.TB, d Target) {
	base := &sink.Batch{Rows: rowsOf(in0, 0, 3), Offsets: []sink.OffsetUpdate{update(in0, -1, 3), update(other, -1, 7)}}
	mustCommit(t, d, base)
	stale := []struct {
		name    string
		updates []sink.OffsetUpdate
		fenced  []record.TopicPartition
	}{
		{"behind", []sink.OffsetUpdate{update(in0, 2, 6), update(in1, -1, 2)}, []record.TopicPartition{in0}},
		{"none expected, one stored", []sink.OffsetUpdate{update(in1, -1, 2), update(other, -1, 9)}, []record.TopicPartition{other}},
		{"one expected, none stored", []sink.OffsetUpdate{update(in0, 3, 6), update(in1, 0, 2)}, []record.TopicPartition{in1}},
		{"two at fault", []sink.OffsetUpdate{update(other, 6, 9), update(in0, -1, 6)}, sortedParts(in0, other)},
	}
	for _, s := range stale {
		b := &sink.Batch{Rows: append(rowsOf(in0, 3, 6), rowsOf(in1, 0, 2)...), DeadLetters: []sink.DeadLetter{deadLetter(other, 7)}, Offsets: s.updates}
		err := d.Sink.Commit(testCtx(t), b)
		var fe *sink.FencedError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: Commit(%s) = %v, want a *sink.FencedError", s.name, describe(b), err)
		}
		if !slices.Equal(fe.Partitions, s.fenced) {
			t.Errorf("%s: FencedError.Partitions = %v, want %v", s.name, fe.Partitions, s.fenced)
		}
		for _, tp := range fe.Partitions {
			stored, ok := fe.Stored[tp]
			want, wantOK := map[record.TopicPartition]int64{in0: 3, other: 7}[tp]
			if fe.Stored != nil && (stored != want || ok != wantOK) {
				t.Errorf("%s: FencedError.Stored[%s] = %d (%v), want %d (%v)", s.name, tp, stored, ok, want, wantOK)
			}
		}
		notRetriable(t, d, err)
		wantOffsets(t, d, map[record.TopicPartition]int64{in0: 3, other: 7})
		wantWritten(t, d, base)
	}
	next := &sink.Batch{Rows: rowsOf(in0, 3, 6), Offsets: []sink.OffsetUpdate{update(in0, 3, 6), update(in1, -1, 2)}}
	mustCommit(t, d, next)
	wantOffsets(t, d, map[record.TopicPartition]int64{in0: 6, in1: 2, other: 7})
	wantWritten(t, d, base, next)
}

// refusedRowIsRowError: a row, or a dead letter, that the destination
// refuses for its content fails the whole batch with a *sink.RowError
// giving its index, its kind and its input record; nothing of the batch
// is written and it is not retriable; the batch without it commits.
func refusedRowIsRowError(t testing.TB, d Target) {
	if len(d.Refused) == 0 {
		t.Fatal("Target.Refused is empty: name a value the destination refuses")
	}
	base := &sink.Batch{Rows: rowsOf(in0, 0, 2), Offsets: []sink.OffsetUpdate{update(in0, -1, 2)}}
	mustCommit(t, d, base)
	rows := rowsOf(in0, 2, 6)
	badRow := slices.Clone(rows)
	badRow[3].Value = d.Refused
	dead := []sink.DeadLetter{deadLetter(in1, 0), deadLetter(in1, 1), deadLetter(in1, 2)}
	badDead := slices.Clone(dead)
	badDead[1].Value = d.Refused
	offsets := []sink.OffsetUpdate{update(in0, 2, 6), update(in1, -1, 3)}
	for _, c := range []struct {
		name   string
		b      *sink.Batch
		index  int
		isDead bool
		input  record.Source
	}{
		{"row", &sink.Batch{Rows: badRow, DeadLetters: dead, Offsets: offsets}, 3, false, badRow[3].Source()},
		{"dead letter", &sink.Batch{Rows: rows, DeadLetters: badDead, Offsets: offsets}, 1, true, badDead[1].Source()},
	} {
		err := d.Sink.Commit(testCtx(t), c.b)
		var re *sink.RowError
		if !errors.As(err, &re) {
			t.Fatalf("%s refused: Commit = %v, want a *sink.RowError", c.name, err)
		}
		if re.Index != c.index || re.DeadLetter != c.isDead || re.Input != c.input {
			t.Errorf("%s refused: RowError{Index: %d, DeadLetter: %v, Input: %v}, want {%d, %v, %v}", c.name, re.Index, re.DeadLetter, re.Input, c.index, c.isDead, c.input)
		}
		notRetriable(t, d, err)
		wantOffsets(t, d, map[record.TopicPartition]int64{in0: 2})
		wantWritten(t, d, base)
	}
	good := &sink.Batch{Rows: rows, DeadLetters: dead, Offsets: offsets}
	mustCommit(t, d, good)
	wantOffsets(t, d, map[record.TopicPartition]int64{in0: 6, in1: 3})
	wantWritten(t, d, base, good)
}

// allOrNothing: a batch that fails at its very end (the last of many
// partitions fenced, the last of many rows refused) leaves none of its
// rows, dead letters or offsets behind; one that commits leaves all.
func allOrNothing(t testing.TB, d Target) {
	var parts []record.TopicPartition
	for p := range int32(8) {
		parts = append(parts, record.TopicPartition{Topic: "sinktest-many", Partition: p})
	}
	last := parts[len(parts)-1]
	base := &sink.Batch{Offsets: []sink.OffsetUpdate{update(last, -1, 100)}}
	mustCommit(t, d, base)
	batch := func(lastExpected int64, refuseLast bool) *sink.Batch {
		b := &sink.Batch{}
		for _, tp := range parts {
			b.Rows = append(b.Rows, rowsOf(tp, 100, 150)...)
			b.DeadLetters = append(b.DeadLetters, deadLetter(tp, 150))
			expected := int64(-1)
			if tp == last {
				expected = lastExpected
			}
			b.Offsets = append(b.Offsets, update(tp, expected, 151))
		}
		if refuseLast {
			b.Rows[len(b.Rows)-1].Value = d.Refused
		}
		return b
	}
	var fe *sink.FencedError
	if err := d.Sink.Commit(testCtx(t), batch(99, false)); !errors.As(err, &fe) {
		t.Fatalf("Commit with its last partition fenced = %v, want a *sink.FencedError", err)
	}
	var re *sink.RowError
	if err := d.Sink.Commit(testCtx(t), batch(100, true)); !errors.As(err, &re) {
		t.Fatalf("Commit with its last row refused = %v, want a *sink.RowError", err)
	}
	wantOffsets(t, d, map[record.TopicPartition]int64{last: 100})
	wantWritten(t, d, base)
	good := batch(100, false)
	mustCommit(t, d, good)
	want := map[record.TopicPartition]int64{}
	for _, tp := range parts {
		want[tp] = 151
	}
	wantOffsets(t, d, want)
	wantWritten(t, d, base, good)
}

// oneOfConcurrentCommitsWins: batches committed at once from the same
// stored offsets (two instances that both believe they own a partition)
// are serialised: exactly one commits, the others are fenced, and the
// winner's rows alone are written.
func oneOfConcurrentCommitsWins(t testing.TB, d Target) {
	base := &sink.Batch{Offsets: []sink.OffsetUpdate{update(in0, -1, 10)}}
	mustCommit(t, d, base)
	const n = 4
	batches := make([]*sink.Batch, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range batches {
		rows := rowsOf(in0, 10, 20)
		for j := range rows {
			rows[j].Key = fmt.Appendf(nil, "instance-%d", i)
		}
		batches[i] = &sink.Batch{Rows: rows, Offsets: []sink.OffsetUpdate{update(in0, 10, 20)}}
		wg.Go(func() { errs[i] = d.Sink.Commit(testCtx(t), batches[i]) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		var fe *sink.FencedError
		switch {
		case err == nil && winner >= 0:
			t.Errorf("batches %d and %d both committed from the same offsets", winner, i)
		case err == nil:
			winner = i
		case !errors.As(err, &fe):
			t.Errorf("batch %d: Commit = %v, want nil or a *sink.FencedError", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d concurrent batches committed: %v", n, errs)
	}
	wantOffsets(t, d, map[record.TopicPartition]int64{in0: 20})
	wantWritten(t, d, base, batches[winner])
}

// typedErrorsAreNotRetriable: Retriable is false for nil and for each of
// the contract's typed errors, wrapped or not; committing the same batch
// again cannot turn them into a success.
func typedErrorsAreNotRetriable(t testing.TB, d Target) {
	errs := []error{
		nil,
		&sink.FencedError{Partitions: []record.TopicPartition{in0}},
		&sink.RowError{Index: 0, Input: record.Source{Topic: in0.Topic}, Err: errors.New("refused")},
		&sink.PersistentError{Destination: "sinktest", Attempts: 3, Err: errors.New("gone")},
		&sink.RefusedError{Err: errors.New("wrong password")},
	}
	for _, err := range errs[1:] {
		errs = append(errs, fmt.Errorf("committing: %w", err))
	}
	for _, err := range errs {
		notRetriable(t, d, err)
	}
}
