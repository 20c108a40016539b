package state

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Expired is an entry deleted by ExpireEach: its key, its value and the
// expiry it was written with.
type Expired struct {
	Key, Value []byte
	Expiry     time.Time
}

// ExpireEach is Expire that also hands each entry it deletes to fn, with
// its value, in the order of (expiry, key): the entries expired by now,
// whether the transaction wrote them or they were committed before, are
// deleted oldest first, so that a bound (limit, maxBytes) that stops it
// leaves the newest, for a later call that hands them over in the same
// order. A stage that emits a final record when its entry expires (an
// aggregate's window with EMIT=close) emits it through fn, into the
// transaction that deletes the entry: once committed, the entry is gone
// and the record written, both or neither. fn's slices are its own. An
// error of fn stops the call and is returned; the transaction must then
// be aborted.
func (t *Txn) ExpireEach(ctx context.Context, store string, partition int32, now time.Time, limit, maxBytes int,
	fn func(Expired) error) (n, bytes int, err error) {
	if fn == nil {
		return t.Expire(ctx, store, partition, now, limit, maxBytes)
	}
	b, at, maxBytes, err := t.expireStart(store, partition, now, maxBytes)
	if err != nil {
		return 0, 0, err
	}
	q := quota{limit: limit, bytes: maxBytes}
	buffered := b.expiredBuffered(at)
	var deleted []Expired
	take := func(key string, enc []byte) {
		deleted = append(deleted, Expired{Key: []byte(key), Value: enc[8:], Expiry: time.Unix(0, expiryOf(enc))})
		q.take(len(key))
	}
	err = b.walkExpiry(ctx, at, func(exp int64, key string, local []byte) bool {
		for len(buffered) > 0 && !q.full() && before(buffered[0], exp, key) {
			take(buffered[0].key, b.deleteBuffered(buffered[0]))
			buffered = buffered[1:]
		}
		if q.full() {
			return false
		}
		if enc := b.deleteLocal(key, local); enc != nil {
			take(key, enc)
		}
		return !q.full()
	})
	for ; err == nil && len(buffered) > 0 && !q.full(); buffered = buffered[1:] {
		take(buffered[0].key, b.deleteBuffered(buffered[0]))
	}
	if err != nil {
		return q.n, maxBytes - q.bytes, err
	}
	for _, d := range deleted {
		if err := fn(d); err != nil {
			return q.n, maxBytes - q.bytes, err
		}
	}
	return q.n, maxBytes - q.bytes, nil
}

// expiredEntry is an entry written in the transaction that has expired.
type expiredEntry struct {
	exp int64
	key string
	e   *entry
}

// before reports whether x comes before the entry (exp, key) in expiry
// order.
func before(x expiredEntry, exp int64, key string) bool {
	return x.exp < exp || (x.exp == exp && x.key < key)
}

// expiredBuffered returns the entries written in the transaction that
// have expired by at, in expiry order.
func (b *buffer) expiredBuffered(at int64) []expiredEntry {
	var out []expiredEntry
	for i := range b.shards {
		s := &b.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if e.dirty && e.enc != nil && expiryOf(e.enc) != 0 && expiryOf(e.enc) <= at {
				out = append(out, expiredEntry{exp: expiryOf(e.enc), key: k, e: e})
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(x, y expiredEntry) int {
		return cmp.Or(cmp.Compare(x.exp, y.exp), cmp.Compare(x.key, y.key))
	})
	return out
}

// deleteBuffered deletes x and returns its encoded value.
func (b *buffer) deleteBuffered(x expiredEntry) []byte {
	s := &b.shards[maphashString(b, x.key)]
	s.mu.Lock()
	enc := x.e.enc
	x.e.enc = nil
	s.mu.Unlock()
	return enc
}

// deleteLocal deletes the committed entry key, which the expiry index
// names as expired, unless the transaction wrote it, and returns its
// encoded value (local, the stored one, when the transaction has not read
// it); nil when it deleted nothing.
func (b *buffer) deleteLocal(key string, local []byte) []byte {
	s := &b.shards[maphashString(b, key)]
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e := s.m[key]; {
	case e == nil:
		s.m[key] = &entry{dirty: true, prior: priorOf(local)}
		return local
	case !e.dirty && e.enc != nil:
		enc := e.enc
		e.enc, e.dirty = nil, true
		return enc
	}
	return nil
}

// walkExpiry calls fn with each committed entry the partition's expiry
// index names as expired by at, in expiry order, with its stored value,
// until fn returns false.
func (b *buffer) walkExpiry(ctx context.Context, at int64, fn func(exp int64, key string, enc []byte) bool) error {
	lower := append(b.p.prefix(), kindExpiry)
	upper := binary.BigEndian.AppendUint64(bytes.Clone(lower), uint64(at)+1)
	it, err := b.t.m.db.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("state: reading the expiry index of %s/%d: %w", b.p.topic, b.p.partition, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(lower):]
		exp, key := int64(binary.BigEndian.Uint64(k)), string(k[8:])
		enc, err := b.t.m.db.get(b.p, []byte(key))
		if err != nil {
			return err
		}
		if enc == nil || expiryOf(enc) != exp {
			continue // a stale index entry: not this key's expiry
		}
		if !fn(exp, key, enc) {
			break
		}
	}
	if err := it.Error(); err != nil {
		return b.t.m.db.checked(fmt.Errorf("state: reading the expiry index of %s/%d: %w", b.p.topic, b.p.partition, err))
	}
	return nil
}
