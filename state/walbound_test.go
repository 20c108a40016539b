package state

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestCommitBoundsWAL holds the write-ahead log's bound (walFlushAge): a
// commit flushes the memtable only once the last flush is flushAge behind
// and the log holds walFlushMin or more, and after that flush the log is
// short again, so an open after a crash has little to replay. Nothing
// written is lost on the way.
func TestCommitBoundsWAL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	l, err := openLocal(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := part{"t", 0}
	var st partState
	next := int64(0)
	// write commits n keys of a 1 KiB value.
	write := func(n int) {
		t.Helper()
		ws := make([]write, n)
		for i := range ws {
			ws[i] = write{key: fmt.Appendf(nil, "k%07d", next+int64(i)), enc: encodeValue(0, bytes.Repeat([]byte{'v'}, 1024))}
		}
		next += int64(n)
		sts, err := l.apply([]partWrites{{p: p, writes: ws, cp: checkpoint{next: next}, before: st}}, true)
		if err != nil {
			t.Fatal(err)
		}
		st = sts[0]
	}
	flushes := func() int64 { return l.db.Metrics().Flush.Count }

	l.flushAge = 0
	write(10) // 10 KiB: under walFlushMin, kept in the log whatever the age
	if n, size := flushes(), l.db.Metrics().WAL.Size; n != 0 || size == 0 {
		t.Fatalf("after 10 KiB: %d flushes, %d bytes in the log; want none and the writes in the log", n, size)
	}
	l.flushAge = time.Hour
	for range 3 {
		write(500) // 1.5 MiB in all, but the last flush is not an hour behind
	}
	if n, size := flushes(), l.db.Metrics().WAL.Size; n != 0 || size < walFlushMin {
		t.Fatalf("within the age: %d flushes, %d bytes in the log; want none and at least %d", n, size, walFlushMin)
	}
	l.flushAge = 0
	write(1)
	deadline := time.Now().Add(20 * time.Second)
	for flushes() == 0 || l.db.Metrics().WAL.Size >= walFlushMin {
		if time.Now().After(deadline) {
			t.Fatalf("past the age with %d bytes in the log: %d flushes, %d bytes left in it", l.db.Metrics().WAL.Size, flushes(), l.db.Metrics().WAL.Size)
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.close()

	l, err = openLocal(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	got, err := l.readPart(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.keys != next || got.cp.next != next {
		t.Fatalf("reopened: %d keys, checkpoint %d; want %d and %d", got.keys, got.cp.next, next, next)
	}
	for _, i := range []int64{0, next / 2, next - 1} {
		if _, closer, err := l.db.Get(dataKey(p.prefix(), fmt.Appendf(nil, "k%07d", i))); err != nil {
			t.Fatalf("reopened: key %d: %v", i, err)
		} else {
			closer.Close()
		}
	}
}
