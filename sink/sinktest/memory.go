// Package sinktest is what every destination must do, as one suite of
// tests (Run), and a destination for tests that passes it: Memory keeps a
// batch's rows, dead letters and next offsets in memory, all of a commit
// or none, and checks each offset update against what it stores, as a
// database would. Memory is what a new destination takes: one package
// implementing sink.Transactional, one registration (Spec), and one call
// of Run in its tests.
package sinktest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// ErrUnavailable is the failure FailNext injects: Retriable says that
// committing again later can succeed.
var ErrUnavailable = errors.New("sinktest: the store is unavailable")

// Memory is an in-memory sink.Transactional. The zero value is empty and
// ready to use; it is safe for concurrent use, so that several sessions
// (instances, or one before and after a restart) can share it.
type Memory struct {
	mu      sync.Mutex
	rows    []sink.Row
	dead    []sink.DeadLetter
	next    map[record.TopicPartition]int64
	commits int
	fail    int    // commits still to fail with ErrUnavailable
	refuse  []byte // a value Commit refuses (RefuseValue); nil for none
}

// Offsets returns the stored next offsets of parts (of every partition
// for none).
func (m *Memory) Offsets(_ context.Context, parts []record.TopicPartition) (map[record.TopicPartition]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[record.TopicPartition]int64{}
	for tp, n := range m.next {
		if len(parts) == 0 || slices.Contains(parts, tp) {
			out[tp] = n
		}
	}
	return out, nil
}

// Commit stores b, all or nothing: a *sink.FencedError when an offset
// update does not start from what is stored, a *sink.RowError for the
// first row or dead letter holding the value RefuseValue names,
// ErrUnavailable while FailNext says so.
func (m *Memory) Commit(_ context.Context, b *sink.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail > 0 {
		m.fail--
		return ErrUnavailable
	}
	if err := m.refused(b); err != nil {
		return err
	}
	var fenced []record.TopicPartition
	for _, u := range b.Offsets {
		stored, ok := m.next[u.TopicPartition]
		if !ok {
			stored = -1
		}
		if stored != u.Expected {
			fenced = append(fenced, u.TopicPartition)
		}
	}
	if len(fenced) > 0 {
		slices.SortFunc(fenced, func(a, b record.TopicPartition) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		return &sink.FencedError{From: "sinktest", Partitions: fenced, Stored: maps.Clone(m.next)}
	}
	if m.next == nil {
		m.next = map[record.TopicPartition]int64{}
	}
	for _, u := range b.Offsets {
		m.next[u.TopicPartition] = u.Next
	}
	m.rows = append(m.rows, b.Rows...)
	m.dead = append(m.dead, b.DeadLetters...)
	m.commits++
	return nil
}

// refused returns the *sink.RowError of b's first row, then dead letter,
// holding the refused value, or nil.
func (m *Memory) refused(b *sink.Batch) error {
	if m.refuse == nil {
		return nil
	}
	for i := range b.Rows {
		if bytes.Equal(b.Rows[i].Value, m.refuse) {
			return &sink.RowError{From: "sinktest", Index: i, Input: b.Rows[i].Source(), Err: errRefused}
		}
	}
	for i := range b.DeadLetters {
		if bytes.Equal(b.DeadLetters[i].Value, m.refuse) {
			return &sink.RowError{From: "sinktest", Index: i, DeadLetter: true, Input: b.DeadLetters[i].Source(), Err: errRefused}
		}
	}
	return nil
}

// errRefused is the RowError.Err of a refused value.
var errRefused = errors.New("the store refuses this value")

// RefuseValue makes Commit refuse every row and dead letter whose value
// is v, as a database refuses a row that breaks a constraint; nil
// refuses none.
func (m *Memory) RefuseValue(v []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refuse = bytes.Clone(v)
}

// SetOffsets stores the next offsets of to whatever is stored, unless
// check fails (sink.OffsetSetter).
func (m *Memory) SetOffsets(ctx context.Context, to map[record.TopicPartition]int64, check func(context.Context) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := check(ctx); err != nil {
		return err
	}
	if m.next == nil {
		m.next = map[record.TopicPartition]int64{}
	}
	maps.Copy(m.next, to)
	return nil
}

// Retriable is true for ErrUnavailable.
func (m *Memory) Retriable(err error) bool { return errors.Is(err, ErrUnavailable) }

// FailNext makes the next n commits fail with ErrUnavailable.
func (m *Memory) FailNext(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = n
}

// Rows returns the rows committed so far, in commit order.
func (m *Memory) Rows() []sink.Row {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.rows)
}

// DeadLetters returns the dead letters committed so far.
func (m *Memory) DeadLetters() []sink.DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.dead)
}

// Commits returns how many commits went through.
func (m *Memory) Commits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}

// Settings are the memory sink's declared settings.
type Settings struct {
	Store string `setting:"STORE" default:"default" doc:"the name of the store the sink writes to; sessions with the same name share it" form:"a name, e.g. shared"`
}

// Spec is the memory sink for a registry: each store name of Settings
// gets its Memory from stores, which the caller keeps to look into.
func Spec(stores *Stores) sink.Spec {
	spec := sink.Typed("rows and offsets in memory, for tests",
		func(_ context.Context, s *Settings, _ sink.Host) (sink.Transactional, func(), error) {
			return stores.Get(s.Store), func() {}, nil
		},
		func(s *Settings) (string, string) { return "memory:" + s.Store, "memory:" + s.Store + ":dead" })
	spec.Title = "memory"
	return spec
}

// Stores are the memory sink's stores by name.
type Stores struct {
	mu sync.Mutex
	m  map[string]*Memory
}

// Get returns the store called name, made empty on first use.
func (s *Stores) Get(name string) *Memory {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*Memory{}
	}
	if s.m[name] == nil {
		s.m[name] = &Memory{}
	}
	return s.m[name]
}
