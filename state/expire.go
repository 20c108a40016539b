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
// keys. limit bounds the deletions of one call (0: no bound), so that a
// backlog of expired keys is spread over transactions. It also moves the
// partition's time to now (it never goes back, but for an Abort of t): from then on Get hides
// entries expired by it, deleted yet or not.
//
// now is record time, e.g. the highest timestamp of the partition's
// records so far, so that a replay expires the same entries. Call it
// before the workers use the partition in t, or after they are done with
// it and before Records; not while they run. It returns how many entries
// it deleted.
func (t *Txn) Expire(ctx context.Context, store string, partition int32, now time.Time, limit int) (int, error) {
	if t.sealed.Load() {
		return 0, ErrTxnEnded
	}
	s, err := t.Store(store, partition)
	if err != nil {
		return 0, err
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
	n := b.expireBuffered(at, limit)
	if limit > 0 && n >= limit {
		return n, nil
	}
	m, err := b.expireLocal(ctx, at, limit-n)
	return n + m, err
}

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
func (b *buffer) expireBuffered(at int64, limit int) int {
	n := 0
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if limit > 0 && n >= limit {
				break
			}
			if e.dirty && e.enc != nil && expiryOf(e.enc) != 0 && expiryOf(e.enc) <= at {
				e.enc = nil
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// expireLocal walks the partition's expiry index up to at and deletes the
// committed entries it names that the transaction has not written.
// limit <= 0 means no bound.
func (b *buffer) expireLocal(ctx context.Context, at int64, limit int) (int, error) {
	lower := append(b.p.prefix(), kindExpiry)
	upper := binary.BigEndian.AppendUint64(append([]byte{}, lower...), uint64(at)+1)
	it, err := b.t.m.db.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, fmt.Errorf("state: reading the expiry index of %s/%d: %w", b.p.topic, b.p.partition, err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok && (limit <= 0 || n < limit); ok = it.Next() {
		key := string(it.Key()[len(lower)+8:])
		s := &b.shards[maphashString(b, key)]
		s.mu.Lock()
		switch e := s.m[key]; {
		case e == nil:
			s.m[key] = &entry{dirty: true}
			n++
		case !e.dirty:
			e.enc, e.dirty = nil, true
			n++
		}
		s.mu.Unlock()
	}
	if err := it.Error(); err != nil {
		return n, fmt.Errorf("state: reading the expiry index of %s/%d: %w", b.p.topic, b.p.partition, err)
	}
	return n, nil
}
