package state

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Expire deletes the entries expired by the partition's record time, with
// tombstones in the changelog, hides them from Get at once, and keeps the
// store bounded; a limit spreads the deletions over transactions.
func TestExpiry(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	t0 := time.Unix(1_700_000_000, 0)
	e.txn(m, true, func(tx *Txn) {
		s := store(t, tx, "seen", 0)
		for i := range 4 {
			if err := s.Put([]byte(fmt.Sprint("w", i)), []byte("x"), t0.Add(time.Duration(i+1)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		put(t, s, "forever", "y")
	})
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := tx.Expire(context.Background(), "seen", 0, t0.Add(150*time.Second), 1, 0)
	if err != nil || n != 1 {
		t.Fatalf("Expire with limit 1: %d, %v; want 1", n, err)
	}
	s := store(t, tx, "seen", 0)
	for k, live := range map[string]bool{"w0": false, "w1": false, "w2": true, "forever": true} {
		if _, ok, _ := s.Get([]byte(k)); ok != live {
			t.Errorf("%s found %v at record time +150s, want %v", k, ok, live)
		}
	}
	e.kafka(tx.Records(), true)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.txn(m, true, func(tx *Txn) {
		n, _, err := tx.Expire(context.Background(), "seen", 0, t0.Add(150*time.Second), 0, 0)
		if err != nil || n != 1 {
			t.Fatalf("Expire of the rest: %d, %v; want 1", n, err)
		}
	})
	if st := status(t, m, "seen", 0); st.Keys != 3 {
		t.Fatalf("keys %d after expiry, want 3", st.Keys)
	}
	tombstones := 0
	for _, r := range e.c.ReadAll(t, ChangelogTopic("g", "seen"), true) {
		if r.Value == nil {
			tombstones++
		}
	}
	if tombstones != 2 {
		t.Fatalf("%d tombstones in the changelog, want 2", tombstones)
	}
	_ = m.Close()
	m = e.open()
	want(t, m, "seen", 0, "w0", "")
	want(t, m, "seen", 0, "w2", "x")
}

// Workers on different keys of one partition use a transaction at once
// (run with -race); every write reaches the changelog once.
func TestConcurrentKeys(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	const workers, keys = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range keys {
				s, err := tx.Store("counts", 0)
				if err != nil {
					t.Error(err)
					return
				}
				k := []byte(fmt.Sprint(w, "-", i))
				if _, ok, err := s.Get(k); err != nil || ok {
					t.Errorf("%s: found %v, %v before any Put", k, ok, err)
				}
				if err := s.Put(k, []byte(fmt.Sprint(i)), time.Time{}); err != nil {
					t.Error(err)
				}
				if v, ok, err := s.Get(k); err != nil || !ok || string(v) != fmt.Sprint(i) {
					t.Errorf("%s = %q, %v, %v after Put", k, v, ok, err)
				}
			}
		})
	}
	wg.Wait()
	recs := tx.Records()
	if len(recs) != workers*keys {
		t.Fatalf("%d records, want %d", len(recs), workers*keys)
	}
	e.kafka(recs, true)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st := status(t, m, "counts", 0); st.Keys != workers*keys || st.Checkpoint != workers*keys {
		t.Fatalf("status %+v, want %d keys and as many offsets", st, workers*keys)
	}
}

// Expire bounds the key bytes of its tombstones (ExpireMaxBytes, or the
// caller's smaller bound) as it bounds their number, and returns them:
// expired entries with 300 KB keys, under no count limit, are deleted four
// a call (the fourth reaches the bound), then one under a bound of 1 byte,
// the rest by the next calls.
func TestExpiryBoundedInBytes(t *testing.T) {
	e := newEnv(t, 1)
	m, err := Open(Options{Dir: e.dir, Group: e.group, Stores: []string{"counts", "seen"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.mu.Lock()
	m.info(part{ChangelogTopic(e.group, "seen"), 0}).ready = true
	m.mu.Unlock()
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	t0 := time.Unix(1_700_000_000, 0)
	s := store(t, tx, "seen", 0)
	for i := range 10 {
		key := fmt.Sprintf("%03d%s", i, strings.Repeat("k", 300_000))
		if err := s.Put([]byte(key), []byte("x"), t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	const keyBytes = 300_003
	var calls []int
	for left, i := 10, 0; left > 0; i++ {
		maxBytes := 0
		if i == 1 {
			maxBytes = 1
		}
		n, bytes, err := tx.Expire(context.Background(), "seen", 0, t0.Add(2*time.Minute), 0, maxBytes)
		if err != nil || n == 0 {
			t.Fatalf("Expire: %d, %v with %d expired entries left", n, err, left)
		}
		if bytes != n*keyBytes {
			t.Errorf("Expire deleted %d entries of %d key bytes, returned %d bytes, want %d", n, keyBytes, bytes, n*keyBytes)
		}
		calls, left = append(calls, n), left-n
	}
	if fmt.Sprint(calls) != "[4 1 4 1]" {
		t.Errorf("deletions per call %v, want [4 1 4 1]: at most %d bytes of keys a call, or 1 when asked", calls, ExpireMaxBytes)
	}
}
