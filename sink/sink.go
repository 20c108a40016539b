// Package sink is the contract a destination of the processor implements,
// other than Kafka itself: what one batch of outputs is (Batch: rows, dead
// letters and, for a destination that keeps them, the next offsets to
// consume), how a destination says why a batch failed (the typed errors),
// and how a destination is registered by name with its declared settings
// (Register, Spec).
//
// A destination that stores the consumed offsets in its own transaction
// (Transactional) gives the processor exactly once on its own: the offsets
// it stores are the truth, and a batch either commits with its offsets or
// leaves nothing behind. sink/sinktest.Run is what every destination must
// do, as one suite of tests; a destination passes it before it registers.
//
// The package is a leaf: it imports the shared vocabulary (record), the
// settings model (settings) and franz-go's record header, no driver, so
// that the session (txn) depends on the contract and never on a database.
package sink

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Row is one output record with the coordinates of the input record it
// came from.
type Row struct {
	Key, Value []byte
	Headers    []kgo.RecordHeader
	// Timestamp is the record's; the zero time means none (a destination
	// stores it as NULL).
	Timestamp time.Time
	// Topic, Partition and Offset are the source (input) record's.
	Topic     string
	Partition int32
	Offset    int64
	// Seq is the index of this output among its input's outputs, from 0.
	Seq int
}

// Source returns the coordinates of the input record r came from.
func (r *Row) Source() record.Source {
	return record.Source{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

// DeadLetter is an input record that failed for good, with why. Its Seq
// is not stored.
type DeadLetter struct {
	Row
	// Error is the failure's message.
	Error string
	// Stage is where it failed, e.g. the transform's name.
	Stage string
	// Attempts is how many times it was tried.
	Attempts int
}

// OffsetUpdate moves one partition's stored next offset from Expected
// (-1: none stored yet) to Next.
type OffsetUpdate struct {
	record.TopicPartition
	Expected, Next int64
}

// String returns topic/partition expected->next.
func (u OffsetUpdate) String() string {
	return u.TopicPartition.String() + " " + strconv.FormatInt(u.Expected, 10) + "->" + strconv.FormatInt(u.Next, 10)
}

// Batch is what one commit writes: all of it or nothing.
type Batch struct {
	Rows        []Row
	DeadLetters []DeadLetter
	// Offsets holds at most one update per partition.
	Offsets []OffsetUpdate
}

// Transactional is a destination that stores the consumed offsets in the
// same transaction as the outputs, and so gives exactly once by itself:
// the session resumes every partition it is assigned from the offset the
// destination stored (Offsets), and commits each batch with the offsets
// after it (Commit), expecting the ones it resumed from or last wrote.
// Its methods are called from the session's goroutine and from the group
// client's callbacks, so they must be safe for concurrent use.
type Transactional interface {
	// Offsets returns the stored next offsets of parts (of every
	// partition the destination holds offsets of, for none); a partition
	// without any is absent from the map.
	Offsets(ctx context.Context, parts []record.TopicPartition) (map[record.TopicPartition]int64, error)
	// Commit writes b in one transaction, all or nothing. An offset
	// update whose Expected is not what is stored writes nothing and
	// returns a *FencedError; a row the destination refuses for its
	// content, a *RowError; a failure no retry is expected to fix, a
	// *PersistentError. Any other error is worth retrying later when
	// Retriable says so.
	Commit(ctx context.Context, b *Batch) error
	// Retriable tells whether committing the same batch again later can
	// succeed after err (a lost connection, a deadlock, a server
	// starting); false for nil and for the typed errors above.
	Retriable(err error) bool
}

// OffsetSetter is a Transactional that can also set its stored offsets
// whatever they are (`processor offsets reset`): SetOffsets stores every
// partition's next offset of to, inserting the missing ones, in one
// transaction, and calls check just before it commits, rolling back when
// check fails. `processor offsets` works with a destination that has it,
// and refuses one that has not.
type OffsetSetter interface {
	Transactional
	SetOffsets(ctx context.Context, to map[record.TopicPartition]int64, check func(context.Context) error) error
}
