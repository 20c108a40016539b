package state

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Expire deletes, in t, the entries of one store partition whose expiry is
// at or before now: each becomes a tombstone in the changelog when t
// commits, so that the store stays bounded under a steady stream of new
// keys. limit bounds the deletions of one call (0: no bound), and
// maxBytes their tombstones' key bytes (0, or more than ExpireMaxBytes:
// ExpireMaxBytes), so that a backlog of expired keys is spread over
// transactions and a transaction's byte bound holds. It also moves the
// partition's time to now (it never goes back, but for an Abort of
// t): from then on Get hides entries expired by it, deleted yet or not.
//
// now is record time, e.g. the highest timestamp of the partition's
// records so far, so that a replay expires the same entries. Call it
// before the workers use the partition in t, or after they are done with
// it and before Records; not while they run. It returns how many entries
// it deleted, and their tombstones' key bytes.
func (t *Txn) Expire(ctx context.Context, store string, partition int32, now time.Time, limit, maxBytes int) (n, bytes int, err error) {
	b, at, maxBytes, err := t.expireStart(store, partition, now, maxBytes)
	if err != nil {
		return 0, 0, err
	}
	q := quota{limit: limit, bytes: maxBytes}
	b.expireBuffered(at, &q)
	if !q.full() {
		err = b.expireLocal(ctx, at, &q)
	}
	return q.n, maxBytes - q.bytes, err
}

// expireStart begins an Expire call on a store's partition: it moves the
// partition's time to now and returns its buffer, now in nanoseconds and
// maxBytes within ExpireMaxBytes.
func (t *Txn) expireStart(store string, partition int32, now time.Time, maxBytes int) (*buffer, int64, int, error) {
	if t.sealed.Load() {
		return nil, 0, 0, ErrTxnEnded
	}
	s, err := t.Store(store, partition)
	if err != nil {
		return nil, 0, 0, err
	}
	b := s.(*buffer)
	at := now.UnixNano()
	t.noteStream(b.pi)
	for {
		cur := atomic.LoadInt64(&b.pi.stream)
		if at <= cur || atomic.CompareAndSwapInt64(&b.pi.stream, cur, at) {
			break
		}
	}
	if maxBytes <= 0 || maxBytes > ExpireMaxBytes {
		maxBytes = ExpireMaxBytes
	}
	return b, at, maxBytes, nil
}

// ExpireMaxBytes bounds the key bytes of the tombstones one Expire call
// writes, as its limit bounds their number: a call stops once they reach
// it, so that large keys do not make a transaction's changelog records
// unbounded in bytes.
const ExpireMaxBytes = 1 << 20

// quota is what one Expire call may still delete: n deleted so far, of
// at most limit (0: no bound), with bytes of tombstone keys left.
type quota struct {
	n, limit, bytes int
}

// full reports whether the call may delete no more.
func (q *quota) full() bool { return (q.limit > 0 && q.n >= q.limit) || q.bytes <= 0 }

// take counts one deletion of a key of size bytes.
func (q *quota) take(size int) { q.n, q.bytes = q.n+1, q.bytes-size }

// noteStream remembers pi's record time before t first moves it, so that
// Abort can put it back: the aborted records are processed again, from
// their earlier time, and must see the entries their transaction's later
// records had expired. Only the loop calls Expire, one at a time.
func (t *Txn) noteStream(pi *partInfo) {
	for _, s := range t.streams {
		if s.pi == pi {
			return
		}
	}
	t.streams = append(t.streams, streamAt{pi: pi, at: atomic.LoadInt64(&pi.stream)})
}

// expireBuffered deletes the entries written in the transaction that have
// expired by at.
func (b *buffer) expireBuffered(at int64, q *quota) {
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if q.full() {
				break
			}
			if e.dirty && e.enc != nil && expiryOf(e.enc) != 0 && expiryOf(e.enc) <= at {
				e.enc = nil
				q.take(len(k))
			}
		}
		s.mu.Unlock()
	}
}

// expireLocal walks the partition's expiry index up to at and deletes the
// committed entries it names that the transaction has not written, as
// far as q allows.
func (b *buffer) expireLocal(ctx context.Context, at int64, q *quota) error {
	lower := append(b.p.prefix(), kindExpiry)
	upper := binary.BigEndian.AppendUint64(append([]byte{}, lower...), uint64(at)+1)
	it, err := b.t.m.db.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("state: reading the expiry index of %s/%d: %w", b.p.topic, b.p.partition, err)
	}
	defer it.Close()
	for ok := it.First(); ok && !q.full(); ok = it.Next() {
		key := string(it.Key()[len(lower)+8:])
		s := &b.shards[maphashString(b, key)]
		s.mu.Lock()
		switch e := s.m[key]; {
		case e == nil:
			s.m[key] = &entry{dirty: true}
			q.take(len(key))
		case !e.dirty:
			e.enc, e.dirty = nil, true
			q.take(len(key))
		}
		s.mu.Unlock()
	}
	if err := it.Error(); err != nil {
		return b.t.m.db.checked(fmt.Errorf("state: reading the expiry index of %s/%d: %w", b.p.topic, b.p.partition, err))
	}
	return nil
}
