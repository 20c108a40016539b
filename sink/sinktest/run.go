package sinktest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// What every destination must do, as one suite: Run checks a
// sink.Transactional against the contract of package sink, each property
// on a destination of its own, through the interface only. A destination
// calls Run in its tests (Memory does, and so does pgsink, on a real
// PostgreSQL); a new one passes it before it registers.

// Target is one destination under test, as Run needs it.
type Target struct {
	// Sink is the destination, open and empty: no offsets, no rows, no
	// dead letters. The opener closes it when the test ends (t.Cleanup).
	Sink sink.Transactional
	// Written returns every row and dead letter committed so far, read
	// back from the destination (not remembered from what was handed to
	// Commit), in any order. Run compares their source coordinates, Seq,
	// Key and Value (Error and Stage too for dead letters).
	Written func(ctx context.Context) (rows []sink.Row, deadLetters []sink.DeadLetter, err error)
	// Refused is a value the destination refuses for its content (as a
	// database refuses a row that breaks a constraint): a batch with a
	// row or a dead letter holding it fails with a *sink.RowError. Run's
	// other values are small decimal integers, which are also JSON.
	Refused []byte
}

// Run checks every property of the contract on destinations open
// returns, one subtest each.
func Run(t *testing.T, open func(t testing.TB) Target) {
	for _, p := range properties {
		t.Run(p.name, func(t *testing.T) { p.check(t, open(t)) })
	}
}

// property is one thing every destination must do, checked on a fresh
// target; check reports failures on t.
type property struct {
	name  string
	check func(t testing.TB, d Target)
}

// properties are the contract, in Run's order.
var properties = []property{
	{"OffsetsRoundTrip", offsetsRoundTrip},
	{"StaleExpectationIsFenced", staleExpectationIsFenced},
	{"RefusedRowIsRowError", refusedRowIsRowError},
	{"AllOrNothing", allOrNothing},
	{"OneOfConcurrentCommitsWins", oneOfConcurrentCommitsWins},
	{"TypedErrorsAreNotRetriable", typedErrorsAreNotRetriable},
}

// The partitions the suite writes.
var (
	in0   = record.TopicPartition{Topic: "sinktest-in", Partition: 0}
	in1   = record.TopicPartition{Topic: "sinktest-in", Partition: 1}
	other = record.TopicPartition{Topic: "sinktest-other", Partition: 3}
)

// testCtx bounds one property's calls of the destination.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rowsOf makes the rows of offsets from..to-1 of tp, one output each
// (two for every third offset), valued by their offset.
func rowsOf(tp record.TopicPartition, from, to int64) []sink.Row {
	var rows []sink.Row
	for o := from; o < to; o++ {
		outputs := 1
		if o%3 == 0 {
			outputs = 2
		}
		for seq := range outputs {
			v := strconv.FormatInt(o*10+int64(seq), 10)
			rows = append(rows, sink.Row{Key: []byte("k" + v), Value: []byte(v), Topic: tp.Topic, Partition: tp.Partition, Offset: o, Seq: seq,
				Timestamp: time.UnixMilli(1_700_000_000_000 + o)})
		}
	}
	return rows
}

// deadLetter makes the dead letter of offset o of tp.
func deadLetter(tp record.TopicPartition, o int64) sink.DeadLetter {
	v := strconv.FormatInt(o*10, 10)
	return sink.DeadLetter{Row: sink.Row{Key: []byte("k" + v), Value: []byte(v), Topic: tp.Topic, Partition: tp.Partition, Offset: o,
		Timestamp: time.UnixMilli(1_700_000_000_000 + o)}, Error: "sinktest: failed for good", Stage: "sinktest", Attempts: 2}
}

// update moves tp's stored offset from expected to next.
func update(tp record.TopicPartition, expected, next int64) sink.OffsetUpdate {
	return sink.OffsetUpdate{TopicPartition: tp, Expected: expected, Next: next}
}

// mustCommit commits b and fails the test unless it went through.
func mustCommit(t testing.TB, d Target, b *sink.Batch) {
	t.Helper()
	if err := d.Sink.Commit(testCtx(t), b); err != nil {
		t.Fatalf("Commit(%s) = %v, want it committed", describe(b), err)
	}
}

// describe names a batch's size and offset updates for messages.
func describe(b *sink.Batch) string {
	return fmt.Sprintf("%d rows, %d dead letters, offsets %v", len(b.Rows), len(b.DeadLetters), b.Offsets)
}

// wantOffsets fails the test unless the destination stores exactly want
// for every partition the suite writes, and for those of parts alone
// when asked for them.
func wantOffsets(t testing.TB, d Target, want map[record.TopicPartition]int64) {
	t.Helper()
	ctx := testCtx(t)
	all, err := d.Sink.Offsets(ctx, nil)
	if err != nil {
		t.Fatalf("Offsets(all) = %v", err)
	}
	if !maps.Equal(all, want) {
		t.Errorf("Offsets(all) = %v, want %v", all, want)
	}
	asked := []record.TopicPartition{in0, other}
	some, err := d.Sink.Offsets(ctx, asked)
	if err != nil {
		t.Fatalf("Offsets(%v) = %v", asked, err)
	}
	wantSome := maps.Clone(want)
	maps.DeleteFunc(wantSome, func(tp record.TopicPartition, _ int64) bool { return !slices.Contains(asked, tp) })
	if !maps.Equal(some, wantSome) {
		t.Errorf("Offsets(%v) = %v, want %v", asked, some, wantSome)
	}
}

// wantWritten fails the test unless the destination holds exactly the
// rows and dead letters of the batches given, each once.
func wantWritten(t testing.TB, d Target, batches ...*sink.Batch) {
	t.Helper()
	var wantRows []sink.Row
	var wantDead []sink.DeadLetter
	for _, b := range batches {
		wantRows = append(wantRows, b.Rows...)
		wantDead = append(wantDead, b.DeadLetters...)
	}
	rows, dead, err := d.Written(testCtx(t))
	if err != nil {
		t.Fatalf("Written = %v", err)
	}
	if got, want := rowKeys(rows), rowKeys(wantRows); !slices.Equal(got, want) {
		t.Errorf("the destination holds %d rows, want %d: %s", len(got), len(want), difference(got, want))
	}
	if got, want := deadKeys(dead), deadKeys(wantDead); !slices.Equal(got, want) {
		t.Errorf("the destination holds %d dead letters, want %d: %s", len(got), len(want), difference(got, want))
	}
}

// difference names the first entries of got that want lacks (written
// when they should not be, or twice) and of want that got lacks; both
// are sorted.
func difference(got, want []string) string {
	var extra, missing []string
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			extra = append(extra, got[i])
			i++
		case i == len(got) || want[j] < got[i]:
			missing = append(missing, want[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	first := func(s []string) string {
		if len(s) > 3 {
			return strings.Join(s[:3], ", ") + fmt.Sprintf(" and %d more", len(s)-3)
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("unexpected [%s]; missing [%s]", first(extra), first(missing))
}

// rowKeys are rows as sorted strings of what a destination must keep.
func rowKeys(rows []sink.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s/%d@%d#%d key=%q value=%q", r.Topic, r.Partition, r.Offset, r.Seq, r.Key, r.Value)
	}
	slices.Sort(out)
	return out
}

// deadKeys are dead letters as sorted strings of what a destination must
// keep.
func deadKeys(dead []sink.DeadLetter) []string {
	out := make([]string, len(dead))
	for i, r := range dead {
		out[i] = fmt.Sprintf("%s/%d@%d key=%q value=%q error=%q stage=%q", r.Topic, r.Partition, r.Offset, r.Key, r.Value, r.Error, r.Stage)
	}
	slices.Sort(out)
	return out
}

// sortedParts returns tps ordered by topic and partition, as a
// FencedError lists them.
func sortedParts(tps ...record.TopicPartition) []record.TopicPartition {
	out := slices.Clone(tps)
	slices.SortFunc(out, func(a, b record.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// notRetriable fails the test if the destination would retry err.
func notRetriable(t testing.TB, d Target, err error) {
	t.Helper()
	if d.Sink.Retriable(err) {
		t.Errorf("Retriable(%v) = true, want false: a retry of the same batch cannot succeed", err)
	}
}
