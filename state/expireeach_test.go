package state

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// ExpireEach hands over every entry that expires exactly once, with the
// last value written, never before its expiry, in (expiry, key) order
// across calls, whatever bounds split it and whether the entry was
// committed or written in the same transaction; held to a map as the
// reference, through random writes, bounds and transactions.
func TestExpireEachAgainstModel(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	r := rand.New(rand.NewPCG(40, 1))
	type val struct {
		v   string
		exp int64
	}
	model := map[string]val{}
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	var lastExp int64
	var lastKey string
	handed := 0
	for round := range 60 {
		e.txn(m, true, func(tx *Txn) {
			s := store(t, tx, "seen", 0)
			expire := func() {
				limit := r.IntN(4) // 0: no bound
				_, _, err := tx.ExpireEach(context.Background(), "seen", 0, now, limit, 0, func(x Expired) error {
					k := string(x.Key)
					w, ok := model[k]
					switch {
					case !ok:
						t.Fatalf("round %d: %s handed over, not in the model (twice?)", round, k)
					case w.v != string(x.Value) || w.exp != x.Expiry.UnixNano():
						t.Fatalf("round %d: %s handed over as %s@%d, want %s@%d", round, k, x.Value, x.Expiry.UnixNano(), w.v, w.exp)
					case w.exp > now.UnixNano():
						t.Fatalf("round %d: %s handed over before its expiry", round, k)
					case w.exp < lastExp || (w.exp == lastExp && k < lastKey):
						t.Fatalf("round %d: %s@%d handed over after %s@%d", round, k, w.exp, lastKey, lastExp)
					}
					lastExp, lastKey = w.exp, k
					delete(model, k)
					handed++
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			expire()
			for range r.IntN(8) {
				k := fmt.Sprint("k", r.IntN(30))
				exp := now.Add(time.Duration(1+r.IntN(5)) * time.Second)
				v := fmt.Sprint(round, "-", r.IntN(100))
				if err := s.Put([]byte(k), []byte(v), exp); err != nil {
					t.Fatal(err)
				}
				model[k] = val{v, exp.UnixNano()}
			}
			now = now.Add(time.Duration(r.IntN(3)) * time.Second)
			expire()
		})
	}
	now = now.Add(time.Hour)
	e.txn(m, true, func(tx *Txn) {
		if _, _, err := tx.ExpireEach(context.Background(), "seen", 0, now, 0, 0, func(x Expired) error {
			delete(model, string(x.Key))
			handed++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if len(model) != 0 || handed < 60 {
		t.Fatalf("%d entries never handed over (%d were)", len(model), handed)
	}
}
