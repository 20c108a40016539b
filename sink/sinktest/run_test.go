package sinktest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// refusedValue is the value the memory sink refuses in the suite.
var refusedValue = []byte(`"refused"`)

// memoryTarget is a fresh Memory as Run's target.
func memoryTarget(testing.TB) Target {
	m := &Memory{}
	m.RefuseValue(refusedValue)
	return Target{Sink: m, Refused: refusedValue, Written: func(context.Context) ([]sink.Row, []sink.DeadLetter, error) {
		return m.Rows(), m.DeadLetters(), nil
	}}
}

// The memory sink does what every destination must.
func TestMemoryConformance(t *testing.T) {
	Run(t, memoryTarget)
}

// Each property is a real check: a memory sink broken in one way passes
// the suite no longer, and the property named for that way is the one
// that fails; the sound memory sink fails none of them.
func TestRunCatchesBrokenSinks(t *testing.T) {
	for _, p := range properties {
		if failures := check(t, p, memoryTarget(t)); len(failures) > 0 {
			t.Errorf("%s fails the sound memory sink: %v", p.name, failures)
		}
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			p := properties[slices.IndexFunc(properties, func(p property) bool { return p.name == m.caughtBy })]
			d := memoryTarget(t)
			mem := d.Sink.(*Memory)
			d.Sink = &mutant{Memory: mem, flaw: m.flaw}
			failures := check(t, p, d)
			if len(failures) == 0 {
				t.Fatalf("%s passes a sink that %s", p.name, m.name)
			}
			t.Logf("%s fails it: %s", p.name, firstLine(failures[0]))
		})
	}
}

// firstLine is s up to its first line break, at most 300 bytes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// check runs one property on d with a recorder, and returns its failures.
func check(t *testing.T, p property, d Target) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.check(r, d)
	}()
	<-done
	return r.failures
}

// recorder is a testing.TB that notes failures instead of failing the
// test, so that a property can be run on a sink that must fail it. Fatal
// ends the property's goroutine, as it ends a test's.
type recorder struct {
	testing.TB // the real test's Cleanup, Helper, Log
	mu         sync.Mutex
	failures   []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, s)
}

func (r *recorder) Error(args ...any)                 { r.note(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.note(fmt.Sprintf(format, args...)) }
func (r *recorder) Fail()                             { r.note("Fail") }
func (r *recorder) FailNow()                          { r.note("FailNow"); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.note(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.note(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

// flaw is one way a destination can break the contract.
type flaw int

const (
	forgetsOffsets flaw = iota
	ignoresAskedParts
	dropsDeadLetters
	fencesNothing
	writesRowsWhenFenced
	movesOtherOffsetsWhenFenced
	namesEveryPartitionFenced
	refusesWithPlainError
	keepsRowsBeforeRefused
	namesWrongRow
	retriesEverything
	checksThenWritesUnlocked
)

// mutants are the broken sinks, each with the property that must catch it.
var mutants = []struct {
	name     string
	flaw     flaw
	caughtBy string
}{
	{"forgets its offsets", forgetsOffsets, "OffsetsRoundTrip"},
	{"returns every partition's offsets when asked for some", ignoresAskedParts, "OffsetsRoundTrip"},
	{"drops the dead letters", dropsDeadLetters, "OffsetsRoundTrip"},
	{"fences nothing", fencesNothing, "StaleExpectationIsFenced"},
	{"writes a fenced batch's rows", writesRowsWhenFenced, "StaleExpectationIsFenced"},
	{"moves a fenced batch's other offsets", movesOtherOffsetsWhenFenced, "StaleExpectationIsFenced"},
	{"names every partition of a fenced batch", namesEveryPartitionFenced, "StaleExpectationIsFenced"},
	{"refuses a row with a plain error", refusesWithPlainError, "RefusedRowIsRowError"},
	{"keeps the rows before a refused one", keepsRowsBeforeRefused, "AllOrNothing"},
	{"names the wrong refused row", namesWrongRow, "RefusedRowIsRowError"},
	{"calls every error retriable", retriesEverything, "TypedErrorsAreNotRetriable"},
	{"checks the offsets, then writes without a lock", checksThenWritesUnlocked, "OneOfConcurrentCommitsWins"},
}

// mutant is a Memory with one flaw.
type mutant struct {
	*Memory
	flaw flaw

	mu      sync.Mutex
	waiting chan struct{} // checksThenWritesUnlocked: closed when a second commit has checked
	checked int
}

func (m *mutant) Offsets(ctx context.Context, parts []record.TopicPartition) (map[record.TopicPartition]int64, error) {
	switch m.flaw {
	case forgetsOffsets:
		return map[record.TopicPartition]int64{}, nil
	case ignoresAskedParts:
		parts = nil
	}
	return m.Memory.Offsets(ctx, parts)
}

func (m *mutant) Retriable(err error) bool {
	if m.flaw == retriesEverything {
		return err != nil || m.Memory.Retriable(err)
	}
	return m.Memory.Retriable(err)
}

func (m *mutant) Commit(ctx context.Context, b *sink.Batch) error {
	switch m.flaw {
	case fencesNothing:
		return m.Memory.Commit(ctx, m.fromStored(ctx, b))
	case checksThenWritesUnlocked:
		return m.unlocked(ctx, b)
	case dropsDeadLetters:
		c := *b
		c.DeadLetters = nil
		return m.Memory.Commit(ctx, &c)
	}
	err := m.Memory.Commit(ctx, b)
	var fe *sink.FencedError
	var re *sink.RowError
	switch {
	case errors.As(err, &fe) && m.flaw == writesRowsWhenFenced:
		_ = m.Memory.Commit(ctx, &sink.Batch{Rows: b.Rows, DeadLetters: b.DeadLetters})
	case errors.As(err, &fe) && m.flaw == movesOtherOffsetsWhenFenced:
		var rest []sink.OffsetUpdate
		for _, u := range b.Offsets {
			if !slices.Contains(fe.Partitions, u.TopicPartition) {
				rest = append(rest, u)
			}
		}
		_ = m.Memory.Commit(ctx, &sink.Batch{Offsets: rest})
	case errors.As(err, &fe) && m.flaw == namesEveryPartitionFenced:
		fe.Partitions = nil
		for _, u := range b.Offsets {
			fe.Partitions = append(fe.Partitions, u.TopicPartition)
		}
	case errors.As(err, &re) && m.flaw == refusesWithPlainError:
		return errors.New(re.Error())
	case errors.As(err, &re) && m.flaw == keepsRowsBeforeRefused && !re.DeadLetter:
		_ = m.Memory.Commit(ctx, &sink.Batch{Rows: b.Rows[:re.Index]})
	case errors.As(err, &re) && m.flaw == namesWrongRow:
		re.Index++
	}
	return err
}

// fromStored is b with every offset update starting from what is stored.
func (m *mutant) fromStored(ctx context.Context, b *sink.Batch) *sink.Batch {
	stored, _ := m.Memory.Offsets(ctx, nil)
	c := *b
	c.Offsets = slices.Clone(b.Offsets)
	for i, u := range c.Offsets {
		if n, ok := stored[u.TopicPartition]; ok {
			c.Offsets[i].Expected = n
		} else {
			c.Offsets[i].Expected = -1
		}
	}
	return &c
}

// unlocked checks the offsets, waits for a second committer of rows to
// have checked them too, and then writes whatever is stored by then.
func (m *mutant) unlocked(ctx context.Context, b *sink.Batch) error {
	stored, _ := m.Memory.Offsets(ctx, nil)
	for _, u := range b.Offsets {
		if n, ok := stored[u.TopicPartition]; (ok && n != u.Expected) || (!ok && u.Expected != -1) {
			return &sink.FencedError{From: "mutant", Partitions: []record.TopicPartition{u.TopicPartition}}
		}
	}
	if len(b.Rows) > 0 {
		m.mu.Lock()
		if m.waiting == nil {
			m.waiting = make(chan struct{})
		}
		if m.checked++; m.checked == 2 {
			close(m.waiting)
		}
		w := m.waiting
		m.mu.Unlock()
		select {
		case <-w:
		case <-time.After(30 * time.Second): // no second committer: write alone
		}
	}
	// The write itself is one step (read what is stored, write over it),
	// so that both committers that passed the check do write: two
	// unserialized fromStored+Commit pairs could read the same offset and
	// fence one another, and the flaw would go unseen by chance.
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Memory.Commit(ctx, m.fromStored(ctx, b))
}
