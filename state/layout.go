package state

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
)

// The key layout's prefix of a partition: a tag byte, the xxHash64 of
// the changelog topic and the partition number, 13 bytes
// whatever the topic's length. The layout before it (layout 1) spelt
// the topic out, length-prefixed: a changelog topic is the group's name,
// the store's and "-changelog", 40-60 bytes in practice, on every key of
// the memtable, the write-ahead log and every flush. A rebuild of a
// million keys under a 41-byte group name wrote 97 MB of write-ahead log
// and flushed 4 memtables in layout 1, 50 MB and 2 in this one
// (BenchmarkRestoreWiped1M under that name).
//
// Two changelog topics of one database sharing a hash would share their
// keys; with the few stores and tables of one processor the chance is
// below 2^-58, less than that of a memory error going unnoticed.
const (
	layoutTag     = 'p'
	layoutVersion = 2
)

// layoutKey holds the database's layout version. It sorts before every
// partition's keys (its first byte is 0, theirs the tag).
var layoutKey = []byte("\x00layout")

// errOldLayout is what a database written in another key layout opens
// with: its keys cannot be read as this one's, so openStore wipes it and
// its stores rebuild from their changelogs, as a damaged one's do.
var errOldLayout = errors.New("the local store was written in an older key layout")

// prefix returns the key prefix of p, kind excluded.
func (p part) prefix() []byte { return p.appendPrefix(make([]byte, 0, prefixLen+1)) }

// appendPrefix appends p's key prefix to b: a key read builds the
// prefix in an array of its own stack and the key in one allocation.
func (p part) appendPrefix(b []byte) []byte {
	b = append(b, layoutTag)
	b = binary.BigEndian.AppendUint64(b, topicHash(p.topic))
	return binary.BigEndian.AppendUint32(b, uint32(p.partition))
}

// prefixLen is the length of every partition's prefix.
const prefixLen = 1 + 8 + 4

// topicHash is the xxHash64 (seed 0) of topic: a key read (a lookup the
// transaction's cache misses) computes it, and xxHash reads 8 bytes at a
// time (12 ns for a 68-byte topic, where FNV-1a's byte at a time
// took 60). Stores written by one build are read by the next, so it
// never changes without a new layoutVersion.
func topicHash(topic string) uint64 { return xxhash.Sum64String(topic) }

// checkLayout reads db's layout version: an empty database is given the
// current one; one of another version (or of none, with keys: layout 1
// had no version) returns errOldLayout.
func checkLayout(db *pebble.DB) error {
	v, closer, err := db.Get(layoutKey)
	switch {
	case err == nil:
		defer func() { _ = closer.Close() }()
		if len(v) == 8 && binary.BigEndian.Uint64(v) == layoutVersion {
			return nil
		}
		return fmt.Errorf("%w (version %x, this build writes %d)", errOldLayout, v, layoutVersion)
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("state: reading the local store's layout: %w", err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("state: reading the local store's layout: %w", err)
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return fmt.Errorf("state: reading the local store's layout: %w", err)
	}
	if !empty {
		return fmt.Errorf("%w (version 1, this build writes %d)", errOldLayout, layoutVersion)
	}
	if err := db.Set(layoutKey, binary.BigEndian.AppendUint64(nil, layoutVersion), pebble.Sync); err != nil {
		return fmt.Errorf("state: writing the local store's layout: %w", err)
	}
	return nil
}
