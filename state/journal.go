package state

import (
	"fmt"
	"time"
)

// Journal records the writes one record's run makes in a transaction's
// stores, so that they can be undone when the record fails: a record
// retried after a retriable error must not count twice, and one that a
// later stage of the chain fails (dead-lettered, skipped) must not count
// at all. One worker owns a Journal and runs one record at a time with it;
// the stores it journals are safe for other workers writing other keys,
// as Store is.
//
// It also sums how many bytes the transaction's changelog records grow by
// (Bytes), so that the processor's byte bound on a transaction counts the
// state it writes, and it refuses (with a *TooLargeError) a write whose
// changelog record could never be produced.
type Journal struct {
	// MaxRecordBytes, when set, is the most a record to a changelog topic
	// may take for the producer to send it (0: no bound).
	MaxRecordBytes func(topic string) int

	txn   *Txn
	views []*journaled
	ops   []undoOp
	bytes int64
}

// undoOp is a key's entry in a buffer as it was before a write.
type undoOp struct {
	b     *buffer
	key   string
	had   bool  // the key had an entry in the buffer
	e     entry // the entry, when it had one
	delta int64 // what the write added to the changelog's bytes
}

// recordOverhead is what a changelog record costs on the wire beyond its
// key and value, at most: the record batch header and the record's
// varints. A write is refused when its key and value and this exceed the
// topic's limit.
const recordOverhead = 100

// TooLargeError is a write refused because its changelog record would be
// larger than the changelog topic accepts: no retry can produce it, so it
// is the record's fault.
type TooLargeError struct {
	Topic string
	Bytes int // key and value
	Limit int // the topic's limit on one record
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the state write of %d bytes (key and value) would make a changelog record larger than %s accepts (%d bytes, max.message.bytes)",
		e.Bytes, e.Topic, e.Limit)
}

// Store returns partition of the named store in t, journaling its writes
// in j. It allocates only on the first call for a store partition in a
// transaction.
func (j *Journal) Store(t *Txn, name string, partition int32) (Store, error) {
	if j.txn != t {
		j.txn, j.ops, j.bytes = t, j.ops[:0], 0
		clear(j.views)
		j.views = j.views[:0]
	}
	s, err := t.Store(name, partition)
	if err != nil {
		return nil, err
	}
	b := s.(*buffer)
	for _, v := range j.views {
		if v.b == b {
			return v, nil
		}
	}
	v := &journaled{b: b, j: j}
	if j.MaxRecordBytes != nil {
		v.limit = j.MaxRecordBytes(b.p.topic) // once a transaction, not per write
	}
	j.views = append(j.views, v)
	return v, nil
}

// Mark keeps the writes journaled so far (the record succeeded) and
// returns the bytes they added to the changelogs.
func (j *Journal) Mark() int64 {
	n := j.bytes
	clear(j.ops)
	j.ops, j.bytes = j.ops[:0], 0
	return n
}

// Undo reverts, newest first, the writes since the last Mark: each key's
// entry in its buffer becomes what it was before. It must run before any
// other record may write those keys, which the processor's ordering
// ensures: the same worker runs the key's next record.
func (j *Journal) Undo() {
	for i := len(j.ops) - 1; i >= 0; i-- {
		op := &j.ops[i]
		s := &op.b.shards[maphashString(op.b, op.key)]
		s.mu.Lock()
		switch p := s.m[op.key]; {
		case !op.had:
			delete(s.m, op.key)
		case p != nil:
			*p = op.e
		default:
			e := op.e
			s.m[op.key] = &e
		}
		s.mu.Unlock()
	}
	clear(j.ops)
	j.ops, j.bytes = j.ops[:0], 0
}

// journaled is a buffer whose writes a Journal records.
type journaled struct {
	b     *buffer
	j     *Journal
	limit int // Journal.MaxRecordBytes of the changelog, 0 for none
}

// Get implements Store.
func (v *journaled) Get(key []byte) ([]byte, bool, error) { return v.b.Get(key) }

// Put implements Store: it journals key's entry, then writes.
func (v *journaled) Put(key, value []byte, expiresAt time.Time) error {
	if v.b.t.sealed.Load() {
		return ErrTxnEnded
	}
	if v.limit > 0 && len(key)+len(value)+recordOverhead > v.limit {
		return &TooLargeError{Topic: v.b.p.topic, Bytes: len(key) + len(value), Limit: v.limit}
	}
	k, enc := encodeEntry(key, value, expiresAt)
	v.b.set(k, enc, v.j)
	return nil
}

// Delete implements Store: it journals key's entry, then deletes it.
func (v *journaled) Delete(key []byte) error {
	if v.b.t.sealed.Load() {
		return ErrTxnEnded
	}
	v.b.set(string(key), nil, v.j)
	return nil
}

// note journals key's entry in b, prev (nil: none), before a write of
// enc; the key's shard lock is held. The changelog grows by the write's
// record (key and encoded value, or the key of a tombstone), less the
// record of an earlier write of the key in the transaction, which this
// one replaces.
func (j *Journal) note(b *buffer, key string, prev *entry, enc []byte) {
	op := undoOp{b: b, key: key, delta: int64(len(key) + len(enc))}
	if prev != nil {
		op.had, op.e = true, *prev
		if prev.dirty {
			op.delta -= int64(len(key) + len(prev.enc))
		}
	}
	j.ops = append(j.ops, op)
	j.bytes += op.delta
}
