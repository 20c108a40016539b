package sinktest

import (
	"context"
	"errors"
	"testing"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// A commit is all or nothing: one that does not start from the stored
// offsets is fenced and writes nothing; one that fails is retriable.
func TestMemoryCommit(t *testing.T) {
	ctx := context.Background()
	var m Memory
	tp := record.TopicPartition{Topic: "in", Partition: 0}
	b := &sink.Batch{Rows: []sink.Row{{Topic: "in", Offset: 0, Value: []byte("a")}},
		Offsets: []sink.OffsetUpdate{{TopicPartition: tp, Expected: -1, Next: 1}}}
	if err := m.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	err := m.Commit(ctx, b) // the same batch again: the stored offset moved
	var fe *sink.FencedError
	if !errors.As(err, &fe) || len(fe.Partitions) != 1 || fe.Stored[tp] != 1 || m.Retriable(err) {
		t.Fatalf("Commit again = %v, want a non-retriable *sink.FencedError", err)
	}
	m.FailNext(1)
	next := &sink.Batch{Offsets: []sink.OffsetUpdate{{TopicPartition: tp, Expected: 1, Next: 2}}}
	if err := m.Commit(ctx, next); !m.Retriable(err) {
		t.Fatalf("Commit = %v, want a retriable failure", err)
	}
	if err := m.Commit(ctx, next); err != nil {
		t.Fatal(err)
	}
	stored, _ := m.Offsets(ctx, []record.TopicPartition{tp})
	if len(m.Rows()) != 1 || stored[tp] != 2 || m.Commits() != 2 {
		t.Errorf("rows %d, stored %v, commits %d; want 1, 2, 2", len(m.Rows()), stored, m.Commits())
	}
}
