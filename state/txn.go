package state

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Store is one partition of one store, as a transaction sees it: the
// committed local state overlaid with the transaction's own writes. Its
// methods are safe for concurrent use with different keys, never with the
// same key at once (key ordering guarantees that).
type Store interface {
	// Get returns the value of key, or ok false when it has none, was
	// deleted in this transaction, or has expired (see Txn.Expire). The
	// value must not be modified; it stays valid after the transaction.
	Get(key []byte) (value []byte, ok bool, err error)
	// Put sets key to value in the transaction. A non-zero expiresAt (in
	// record time: a record timestamp plus a window, say) lets Expire
	// delete the entry once the partition's time passed it. key and value
	// are copied.
	Put(key, value []byte, expiresAt time.Time) error
	// Delete removes key in the transaction; the changelog receives a
	// tombstone.
	Delete(key []byte) error
}

// Txn is the state side of one Kafka transaction: per store partition, a
// buffer of the keys read and written. Nothing of it reaches the local
// database before Commit.
type Txn struct {
	m    *Manager
	seed maphash.Seed

	mu     sync.RWMutex
	bufs   map[part]*buffer
	sealed atomic.Bool // Records was called: no more writes
	ended  atomic.Bool // Commit or Abort was called

	recs   []*kgo.Record
	priors []prior // of each record's key
	parts  []part  // each record's partition, as Records set it

	streams []streamAt // the record times Expire moved, as they were
}

// streamAt is a partition's record time before a transaction moved it.
type streamAt struct {
	pi *partInfo
	at int64
}

// Begin starts the state transaction of the Kafka transaction that has
// just begun. It fails with ErrTxnOpen while the previous one is neither
// committed nor aborted: its writes must reach the local database before
// anything reads it again.
func (m *Manager) Begin() (*Txn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open != nil {
		return nil, ErrTxnOpen
	}
	t := &Txn{m: m, seed: maphash.MakeSeed(), bufs: map[part]*buffer{}}
	m.open = t
	return t, nil
}

// Store returns partition of the named store in t. It fails with
// ErrUnknownStore for a name not in Options.Stores and ErrNotRestored for a
// partition Restore has not made ready (or Revoke made unready).
func (t *Txn) Store(name string, partition int32) (Store, error) {
	topic, ok := t.m.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStore, name)
	}
	p := part{topic, partition}
	t.mu.RLock()
	b := t.bufs[p]
	t.mu.RUnlock()
	if b != nil {
		return b, nil
	}
	if t.ended.Load() {
		return nil, ErrTxnEnded
	}
	t.m.mu.RLock()
	pi := t.m.parts[p]
	ready := pi != nil && pi.ready
	t.m.mu.RUnlock()
	if !ready {
		return nil, fmt.Errorf("%w: %s/%d", ErrNotRestored, topic, partition)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b = t.bufs[p]; b == nil {
		b = &buffer{t: t, p: p, pi: pi}
		for i := range b.shards {
			b.shards[i].m = map[string]*entry{}
		}
		t.bufs[p] = b
	}
	return b, nil
}

// entry is a key as the transaction knows it: enc is its encoded value
// (encodeValue), nil when it has none; dirty when the transaction wrote it.
type entry struct {
	enc   []byte
	dirty bool
	prior // the committed entry, when the transaction read it
}

// prior is what a transaction learnt of a key's committed entry by
// reading it, so that Commit need not look it up again.
type prior struct {
	known, had bool
	oldLen     int32
	oldExp     int64
}

// priorOf is what reading enc from the local store tells.
func priorOf(enc []byte) prior {
	if enc == nil {
		return prior{known: true}
	}
	return prior{known: true, had: true, oldLen: int32(len(enc) - 8), oldExp: expiryOf(enc)}
}

const shards = 32

// buffer is one store partition in a transaction, its keys spread over
// shards so that workers on different keys rarely wait for one another.
type buffer struct {
	t      *Txn
	p      part
	pi     *partInfo
	shards [shards]shard
}

type shard struct {
	mu sync.Mutex
	m  map[string]*entry // in place, so that a write of a key known is one lookup
	_  [40]byte          // a cache line each
}

func (b *buffer) shard(key []byte) *shard {
	return &b.shards[maphash.Bytes(b.t.seed, key)%shards]
}

// maphashString is the shard index of key.
func maphashString(b *buffer, key string) uint64 { return maphash.String(b.t.seed, key) % shards }

// Get implements Store.
func (b *buffer) Get(key []byte) ([]byte, bool, error) {
	s := b.shard(key)
	var e entry
	s.mu.Lock()
	p := s.m[string(key)]
	if p != nil {
		e = *p
	}
	s.mu.Unlock()
	if p == nil {
		enc, err := b.t.m.db.get(b.p, key)
		if err != nil {
			return nil, false, err
		}
		e = entry{enc: enc, prior: priorOf(enc)}
		s.mu.Lock()
		if cur := s.m[string(key)]; cur != nil {
			e = *cur
		} else {
			s.m[string(key)] = &entry{enc: enc, prior: e.prior}
		}
		s.mu.Unlock()
	}
	if e.enc == nil {
		return nil, false, nil
	}
	if exp := expiryOf(e.enc); exp != 0 && exp <= atomic.LoadInt64(&b.pi.stream) {
		return nil, false, nil
	}
	return e.enc[8:], true, nil
}

// Put implements Store.
func (b *buffer) Put(key, value []byte, expiresAt time.Time) error {
	if b.t.sealed.Load() {
		return ErrTxnEnded
	}
	k, enc := encodeEntry(key, value, expiresAt)
	b.set(k, enc, nil)
	return nil
}

// encodeEntry returns key as a string and the encoded value (encodeValue)
// of a Put, in one allocation: the key's bytes are never written again,
// so the string shares them.
func encodeEntry(key, value []byte, expiresAt time.Time) (string, []byte) {
	var exp int64
	if !expiresAt.IsZero() {
		exp = max(expiresAt.UnixNano(), 1)
	}
	buf := make([]byte, len(key)+8+len(value))
	copy(buf, key)
	binary.BigEndian.PutUint64(buf[len(key):], uint64(exp))
	copy(buf[len(key)+8:], value)
	return unsafe.String(unsafe.SliceData(buf), len(key)), buf[len(key):]
}

// Delete implements Store.
func (b *buffer) Delete(key []byte) error {
	if b.t.sealed.Load() {
		return ErrTxnEnded
	}
	b.set(string(key), nil, nil)
	return nil
}

// set writes enc (nil: a deletion) for key in the buffer; with j, it
// first journals the key's entry as it was, under the same lock.
func (b *buffer) set(key string, enc []byte, j *Journal) {
	s := &b.shards[maphashString(b, key)]
	s.mu.Lock()
	p := s.m[key]
	if j != nil {
		j.note(b, key, p, enc)
	}
	if p != nil {
		p.enc, p.dirty = enc, true
	} else {
		s.m[key] = &entry{enc: enc, dirty: true}
	}
	s.mu.Unlock()
}

// recordSlab is the most changelog records Records makes in one
// allocation: a transaction of new keys (a dedupe's new ids) has one a
// write, and Records runs on the processor's loop, between transactions.
// The first allocation is for 8, each next one twice as many, so that a
// transaction of a few writes does not make hundreds.
const recordSlab = 256

// Records seals t (writes fail from now on) and returns its changelog
// records: one per key written, the last value, a tombstone (nil value)
// for a deletion, each with its topic and partition set. Produce exactly
// these records, the same pointers, into the Kafka transaction before it
// ends: Commit reads the offsets their acknowledgements set. The producer
// must keep their partition (see Partitioner). Calling it again returns
// the same records.
func (t *Txn) Records() []*kgo.Record {
	if t.sealed.Swap(true) {
		return t.recs
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var slab []kgo.Record // the records, made up to recordSlab at a time rather than one by one
	size := 8
	for _, b := range t.bufs {
		for i := range b.shards {
			s := &b.shards[i]
			s.mu.Lock()
			for k, e := range s.m {
				if e.dirty {
					if len(slab) == 0 {
						slab, size = make([]kgo.Record, size), min(2*size, recordSlab)
					}
					r := &slab[0]
					slab = slab[1:]
					*r = kgo.Record{Topic: b.p.topic, Partition: b.p.partition, Key: []byte(k), Value: e.enc, Offset: -1}
					t.recs = append(t.recs, r)
					t.priors = append(t.priors, e.prior)
					t.parts = append(t.parts, b.p)
				}
			}
			s.mu.Unlock()
		}
	}
	return t.recs
}

// Abort discards t: its Kafka transaction aborted, so nothing of it
// happened, neither its writes nor the record time its Expire calls
// moved. It may be called in any state and more than once. If the
// Kafka transaction's outcome is unknown, Abort, then Revoke and Restore
// every partition: Restore reads the changelog from the checkpoint, which
// brings in the transaction if it did commit.
func (t *Txn) Abort() {
	if t.ended.Swap(true) {
		return
	}
	t.sealed.Store(true)
	for _, s := range t.streams {
		atomic.StoreInt64(&s.pi.stream, s.at) // Expire's moves did not happen either
	}
	t.release()
}

// release lets the Manager begin the next transaction.
func (t *Txn) release() {
	t.m.mu.Lock()
	if t.m.open == t {
		t.m.open = nil
	}
	t.m.mu.Unlock()
}
