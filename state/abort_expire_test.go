package state

import (
	"context"
	"testing"
	"time"
)

// An aborted transaction's Expire does not stand: the partition's record
// time goes back with the abort, so that the replay of the aborted
// records, from their earlier time, sees the entries the aborted
// transaction's later records had expired.
func TestAbortUndoesExpire(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	t0 := time.Unix(1_700_000_000, 0)
	e.txn(m, true, func(tx *Txn) {
		if err := store(t, tx, "counts", 0).Put([]byte("k@w0"), []byte("2"), t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
	// A transaction polls records of the next window, then aborts.
	tx, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx.Expire(context.Background(), "counts", 0, t0.Add(90*time.Second), 1000, 0); err != nil {
		t.Fatal(err)
	}
	e.kafka(tx.Records(), false)
	tx.Abort()
	// The replay starts before the window's end again: the entry must be there.
	tx, err = m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	if _, _, err := tx.Expire(context.Background(), "counts", 0, t0.Add(30*time.Second), 1000, 0); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := store(t, tx, "counts", 0).Get([]byte("k@w0")); err != nil || !ok {
		t.Fatalf("after an aborted Expire at +90s, a transaction at +30s reads k@w0 = %q, found %v, %v; want 2", v, ok, err)
	}
}
