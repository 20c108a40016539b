package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// The local store is one Pebble database holding every store partition.
// A key begins with the partition's prefix, a hash of the changelog topic
// and the partition number (layout.go), so that one range deletion wipes
// a partition; a kind byte follows:
//
//	prefix 'd' key          -> expiry (8 bytes, unix ns, 0 = never) + value
//	prefix 'x' expiry key   -> nothing: the expiry index, in expiry order
//	prefix 'c'              -> checkpoint: next changelog offset (8) + topic ID (16)
//	prefix 's'              -> keys (8) and bytes (8) of the partition
//
// The checkpoint and the counts change in the same batch as the data they
// describe, so that they can never disagree with it.
const (
	kindData       = 'd'
	kindExpiry     = 'x'
	kindCheckpoint = 'c'
	kindStats      = 's'
)

// part identifies one partition of one store.
type part struct {
	topic     string // the store's changelog topic
	partition int32
}

// DefaultCacheBytes is the block cache of a local database when the
// options leave it 0 (PROCESSOR_STATE_CACHE_BYTES's default).
const DefaultCacheBytes = 64 << 20

// The database's other memory: memtables (Pebble keeps up to two while
// one flushes, and one more for reuse). A larger memtable takes a
// restore's or a commit's batch whole instead of as a flushable batch of
// its own.
//
// Pebble reserves each memtable's size from the block cache, so the
// cache is made memTableReserve larger than the blocks it is to hold: a
// 64 MiB cache with the memtables reserved from it held next to no
// blocks, and a dedupe of 500,000 new ids spent 28-30 CPU s a million
// records decoding the same filter and index blocks again (17 with the
// memtables reserved beside the blocks).
const (
	memTableBytes   = 32 << 20
	memTableReserve = 3 * memTableBytes
)

// l0CompactionThreshold is Pebble's L0CompactionThreshold, twice its
// default: it compacts level 0 once it holds about 4 overlapping
// sublevels (flushed memtables), not 2. A rebuild of 1,000,000 keys
// flushes 3 memtables; at Pebble's default the second flush started a
// compaction of level 0 into the last level (0.4 s of a core) that ran
// against the end of the restore and the first transactions on 2 cores.
// Point reads cross at most 2 more sublevels, whose bloom filters answer
// for absent keys; the stateful drains (aggregate, dedupe) were unchanged
// side by side (docs/state.md, "Writing on lanes"). Pebble stops
// writes at 12 sublevels (L0StopWritesThreshold), well above.
const l0CompactionThreshold = 8

// The write-ahead log's bound. Pebble flushes a memtable when it is full
// (memTableBytes); until then its writes live in the write-ahead log,
// which an open after a crash replays entry by entry: 0.4-0.5 s for a
// memtable filled by a drain of 1,000,000 keys, most of a restart's time.
// So a commit that finds the last flush walFlushAge behind and at least
// walFlushMin in the log flushes the memtable in the background: after a
// crash the log to replay holds at most the writes of the last few
// seconds, or a memtable's, whichever is less. Under load the memtable
// fills first and nothing changes; a smaller memtable would bound the log
// as well, but cost 30-40% more CPU a record in compactions (a drain of
// 1,000,000 keys with 4 MiB memtables) and slowed a rebuild.
const (
	walFlushAge = 5 * time.Second
	walFlushMin = 1 << 20
)

// local wraps the Pebble database.
type local struct {
	db  *pebble.DB
	dir string
	// flushed is when a memtable last went to disk (or the database was
	// opened), in unix nanoseconds; flushAge is walFlushAge but in tests.
	flushed  atomic.Int64
	flushAge time.Duration
}

// openLocal opens (or creates) the database in dir with a block cache of
// cacheBytes (0: DefaultCacheBytes) beside its memtables; onFatal receives what Pebble cannot
// go on after (storeLogger). Its tables carry bloom filters, so that a
// read of a key the store never had (a dedupe's new id) skips their
// blocks.
func openLocal(dir string, cacheBytes int64, onFatal func(error)) (*local, error) {
	if cacheBytes <= 0 {
		cacheBytes = DefaultCacheBytes
	}
	cache := pebble.NewCache(cacheBytes + memTableReserve)
	defer cache.Unref() // the database holds its own reference
	l := &local{dir: dir, flushAge: walFlushAge}
	l.flushed.Store(time.Now().UnixNano())
	opts := &pebble.Options{Logger: storeLogger{dir: dir, onFatal: onFatal}, Cache: cache, MemTableSize: memTableBytes, L0CompactionThreshold: l0CompactionThreshold,
		EventListener: &pebble.EventListener{FlushEnd: func(pebble.FlushInfo) { l.flushed.Store(time.Now().UnixNano()) }}}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("state: opening the local store in %s: %w", dir, err)
	}
	if err := checkLayout(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	l.db = db
	return l, nil
}

// boundWAL starts a flush of the memtable when the last one is flushAge
// behind and the write-ahead log holds walFlushMin or more (see
// walFlushAge). Call it after a batch is committed; it does not wait for
// the flush.
func (l *local) boundWAL() {
	now := time.Now()
	if now.Sub(time.Unix(0, l.flushed.Load())) < l.flushAge {
		return
	}
	l.flushed.Store(now.UnixNano()) // the log is looked at once a flushAge at most
	if l.db.Metrics().WAL.Size >= walFlushMin {
		_, _ = l.db.AsyncFlush() // it refuses only a read-only database
	}
}

// checkpoint is what a partition's local state reflects of its changelog.
type checkpoint struct {
	next    int64    // the next changelog offset to read
	topicID [16]byte // the changelog topic's ID, to tell a recreated topic
}

// partState is the persisted state of a partition besides its data.
type partState struct {
	cp    checkpoint
	hasCP bool
	keys  int64
	bytes int64
}

// readPart returns p's checkpoint and counts.
func (l *local) readPart(p part) (partState, error) {
	var st partState
	pre := p.prefix()
	v, closer, err := l.db.Get(append(pre, kindCheckpoint))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return st, l.checked(fmt.Errorf("state: reading the checkpoint of %s/%d: %w", p.topic, p.partition, err))
	default:
		if len(v) == 24 {
			st.hasCP = true
			st.cp.next = int64(binary.BigEndian.Uint64(v))
			copy(st.cp.topicID[:], v[8:])
		}
		closer.Close()
	}
	v, closer, err = l.db.Get(append(pre, kindStats))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return st, l.checked(fmt.Errorf("state: reading the counts of %s/%d: %w", p.topic, p.partition, err))
	default:
		if len(v) == 16 {
			st.keys = int64(binary.BigEndian.Uint64(v))
			st.bytes = int64(binary.BigEndian.Uint64(v[8:]))
		}
		closer.Close()
	}
	return st, nil
}

// get returns the encoded entry (encodeValue) of key in p, copied, or
// nil when there is none.
func (l *local) get(p part, key []byte) ([]byte, error) {
	var pre [prefixLen]byte
	v, closer, err := l.db.Get(dataKey(p.appendPrefix(pre[:0]), key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, l.checked(fmt.Errorf("state: reading a key of %s/%d: %w", p.topic, p.partition, err))
	}
	defer closer.Close()
	if len(v) < 8 {
		return nil, fmt.Errorf("state: a stored value of %s/%d has %d bytes, under the 8 of its expiry", p.topic, p.partition, len(v))
	}
	return append(make([]byte, 0, len(v)), v...), nil
}

// wipe deletes everything of p: data, index, checkpoint and counts.
func (l *local) wipe(p part) error {
	start := p.prefix()
	end := append(p.prefix(), 0xff)
	if err := l.db.DeleteRange(start, end, pebble.NoSync); err != nil {
		return l.checked(fmt.Errorf("state: wiping %s/%d: %w", p.topic, p.partition, err))
	}
	return nil
}

// close closes the database.
func (l *local) close() error { return l.db.Close() }

// dataKey is the key of a data entry.
func dataKey(prefix, key []byte) []byte {
	b := make([]byte, 0, len(prefix)+1+len(key))
	b = append(append(b, prefix...), kindData)
	return append(b, key...)
}

// expiryKey is the key of an entry of the expiry index.
func expiryKey(prefix []byte, exp int64, key []byte) []byte {
	b := make([]byte, 0, len(prefix)+9+len(key))
	b = append(append(b, prefix...), kindExpiry)
	b = binary.BigEndian.AppendUint64(b, uint64(exp))
	return append(b, key...)
}

// encodeValue is the stored and changelog form of a value: its expiry
// (unix nanoseconds, 0 for never) then the value.
func encodeValue(exp int64, value []byte) []byte {
	b := make([]byte, 8, 8+len(value))
	binary.BigEndian.PutUint64(b, uint64(exp))
	return append(b, value...)
}

// expiryOf returns the expiry of an encoded value.
func expiryOf(enc []byte) int64 { return int64(binary.BigEndian.Uint64(enc) & math.MaxInt64) }

// apply writes the collapsed changes of each partition of parts to the
// database in one atomic batch, with each partition's new checkpoint and
// counts, and returns the counts. The previous entry of every key is
// needed, so that the counts stay exact and a changed expiry leaves no
// stale index entry: a write that does not know it already (its
// transaction never read the key) looks it up, in key order, with one
// iterator per partition. sync says whether the batch must be on disk
// when apply returns (see below); a batch written without it may be lost
// to a crash, with its checkpoint, along with the batches after it.
func (l *local) apply(parts []partWrites, sync bool) ([]partState, error) {
	b := l.db.NewBatchWithSize(batchSize(parts))
	defer b.Close()
	out := make([]partState, len(parts))
	for i, pw := range parts {
		st, err := l.applyPart(b, pw)
		if err != nil {
			return nil, l.checked(err)
		}
		out[i] = st
	}
	// Sync: Pebble keeps a NoSync write in its write-ahead log's buffer
	// until a 32 KiB block fills, so a SIGKILL would lose the last
	// transactions' batches and their checkpoints, and the next Restore
	// would read far more than the tail (all of a small changelog). The
	// log keeps the batch atomic either way. A restore's batches but its
	// last need not be synced: losing them costs only their reading again.
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	if err := b.Commit(opt); err != nil {
		return nil, l.checked(fmt.Errorf("state: writing a batch of %d partitions: %w", len(parts), err))
	}
	l.boundWAL()
	return out, nil
}

// batchSize is about the bytes of the batch that applies parts, so that
// it is allocated once: a batch grown by doubling from Pebble's default
// allocated about three times its size on the way (a restore's batch
// of 20,000 records, 1.4 MiB, allocated 4 MiB).
func batchSize(parts []partWrites) int {
	n := 64
	for _, pw := range parts {
		pre := prefixLen + 1     // and the kind
		n += 2 * (pre + 24 + 16) // the checkpoint and the counts
		for _, w := range pw.writes {
			n += pre + len(w.key) + len(w.enc) + 11 // kind, two varints
			if len(w.enc) >= 8 && expiryOf(w.enc) != 0 {
				n += pre + 8 + len(w.key) + 6 // its index entry
			}
		}
	}
	return n
}

// applyPart adds the changes of pw to b and returns its counts after them.
func (l *local) applyPart(b *pebble.Batch, pw partWrites) (partState, error) {
	st := pw.before
	pre := pw.p.prefix()
	// In key order, the lookups' seeks move forward from where the last
	// one ended.
	order := keyOrder(pw.writes)
	lk := lookup{l: l, pw: &pw}
	defer lk.close()
	var scratch []byte // the data key; the batch copies what it is given
	// The expiry index's changes go in after the data, in key order too:
	// Pebble inserts a batch into its memtable in the batch's order, and
	// an insert next to the previous one is far cheaper than one that
	// jumps between the data and the index.
	var index []indexOp
	for i, wi := range order {
		w := &pw.writes[wi]
		if i+1 < len(order) && bytes.Equal(w.key, pw.writes[order[i+1]].key) {
			continue // overwritten later in the batch
		}
		scratch = append(append(append(scratch[:0], pre...), kindData), w.key...)
		dk := scratch
		h, err := lk.prior(w, dk)
		if err != nil {
			return st, err
		}
		if w.had {
			st.keys--
			st.bytes -= int64(len(w.key) + w.oldLen)
			if w.oldExp != 0 {
				index = append(index, indexOp{key: expiryKey(pre, w.oldExp, w.key), del: true})
			}
		}
		if w.enc == nil {
			if w.had {
				_ = b.Delete(dk, nil)
			}
			continue
		}
		_ = b.Set(dk, w.enc, nil)
		if pw.seen != nil {
			pw.seen.add(h)
		}
		st.keys++
		st.bytes += int64(len(w.key) + len(w.enc) - 8)
		if exp := expiryOf(w.enc); exp != 0 {
			index = append(index, indexOp{key: expiryKey(pre, exp, w.key)})
		}
	}
	applyIndex(b, index)
	if err := lk.close(); err != nil {
		return st, err
	}
	st.cp, st.hasCP = pw.cp, true
	var cp [24]byte
	binary.BigEndian.PutUint64(cp[:], uint64(pw.cp.next))
	copy(cp[8:], pw.cp.topicID[:])
	_ = b.Set(append(pw.p.prefix(), kindCheckpoint), cp[:], nil)
	var sv [16]byte
	binary.BigEndian.PutUint64(sv[:], uint64(st.keys))
	binary.BigEndian.PutUint64(sv[8:], uint64(st.bytes))
	_ = b.Set(append(pw.p.prefix(), kindStats), sv[:], nil)
	return st, nil
}

// applyIndex adds the expiry index's changes to b in key order. A key's
// old entry deleted and set again (the same expiry) must end set: of two
// changes of one index key (only one write makes both), the deletion
// goes first.
func applyIndex(b *pebble.Batch, index []indexOp) {
	slices.SortFunc(index, func(x, y indexOp) int {
		if c := bytes.Compare(x.key, y.key); c != 0 {
			return c
		}
		switch { // one key's deletion and set come from one write, in that order
		case x.del == y.del:
			return 0
		case x.del:
			return -1
		}
		return 1
	})
	for _, op := range index {
		if op.del {
			_ = b.Delete(op.key, nil)
		} else {
			_ = b.Set(op.key, nil, nil)
		}
	}
}

// indexOp is a change of the expiry index: an entry set, or deleted.
type indexOp struct {
	key []byte
	del bool
}

// write is one collapsed change of a key: enc is the encoded value
// (encodeValue), nil for a deletion.
type write struct {
	key []byte
	enc []byte
	// known says that had, oldExp and oldLen are the key's committed
	// entry, as the transaction read it; apply looks it up otherwise.
	known, had bool
	oldExp     int64
	oldLen     int
}

// partWrites are the changes of one partition to apply (of one key, the
// last in the list counts), its checkpoint
// after them and its persisted state before them.
type partWrites struct {
	p      part
	writes []write
	cp     checkpoint
	before partState
	// seen, when not nil, holds every key the partition may have had
	// before these changes: it was wiped, and only writes that went
	// through seen followed (see keyFilter). Keys seen never had need no
	// lookup; apply adds the keys it sets.
	seen *keyFilter
}
