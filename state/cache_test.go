package state

import (
	"path/filepath"
	"testing"
	"time"
)

// TestCacheBytesKeepsBlocks reads back 48 MiB of committed values, and
// keys never written, through a Manager opened with an 8 MiB block
// cache: every read finds what was written (through the bloom filters
// too), the cache holds no more than its size beside the memtables'
// reservation, and a second read of the first keys is served from the
// cache alone, which it could not be were the memtables reserved from
// the blocks' share.
func TestCacheBytesKeepsBlocks(t *testing.T) {
	const limit = 8 << 20
	m, err := Open(Options{Dir: filepath.Join(t.TempDir(), "state"), Group: "g", Stores: []string{"s"}, CacheBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.mu.Lock()
	m.info(part{ChangelogTopic("g", "s"), 0}).ready = true
	m.mu.Unlock()
	const n, size = 48 << 10, 1 << 10
	val := make([]byte, size)
	for i := 0; i < n; i += n / 4 {
		tx, _ := m.Begin()
		s, _ := tx.Store("s", 0)
		for k := i; k < i+n/4; k++ {
			val[0], val[1] = byte(k), byte(k>>8)
			if err := s.Put(keyOf(k), val, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		for j, r := range tx.Records() {
			r.Offset = int64(i + j)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.db.db.Flush(); err != nil {
		t.Fatal(err)
	}
	read := func(from, to int) {
		tx, _ := m.Begin()
		defer tx.Abort()
		s, _ := tx.Store("s", 0)
		for k := from; k < to; k++ {
			v, ok, err := s.Get(keyOf(k))
			if err != nil || !ok || len(v) != size || v[0] != byte(k) || v[1] != byte(k>>8) {
				t.Fatalf("key %d: %d bytes, found %v, err %v", k, len(v), ok, err)
			}
			if _, ok, _ := s.Get(keyOf(n + k)); ok {
				t.Fatalf("key %d, never written, found", n+k)
			}
		}
	}
	read(0, n)
	bc := m.db.db.Metrics().BlockCache
	if bc.Size > limit+memTableReserve {
		t.Fatalf("the block cache holds %d bytes, over its %d and the memtables' %d", bc.Size, limit, memTableReserve)
	}
	const hot = 1000 // about 1 MiB of values
	read(0, hot)
	read(0, hot)
	after := m.db.db.Metrics().BlockCache
	read(0, hot)
	if again := m.db.db.Metrics().BlockCache; again.Misses != after.Misses {
		t.Fatalf("reading %d keys just read missed the cache %d times (%d bytes cached)", hot, again.Misses-after.Misses, again.Size)
	}
}
