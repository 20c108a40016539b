package state

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// keyOrderRef is keyOrder's definition: indices sorted by key, then by
// index.
func keyOrderRef(ws []write) []int32 {
	order := make([]int32, len(ws))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		if c := bytes.Compare(ws[x].key, ws[y].key); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	return order
}

// keyOrder sorts as its definition does, whatever the keys: shared
// prefixes of any length, keys that end inside or right after the shared
// prefix, zero bytes (which a key's end reads as), 0xff, duplicates, and
// the empty key; in batches below radixMin (a comparison sort) and above
// it (radixSort), whose keys vary in few or many of their words' bytes.
func TestKeyOrderMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0x7f, 0xfe, 0xff}
	for round := range 3000 {
		prefix := make([]byte, rng.IntN(12))
		for i := range prefix {
			prefix[i] = alphabet[rng.IntN(len(alphabet))]
		}
		n := rng.IntN(60)
		if round%4 == 0 {
			n = radixMin + rng.IntN(3*radixMin)
		}
		ws := make([]write, n)
		for i := range ws {
			if i > 0 && rng.IntN(5) == 0 { // a key written again
				ws[i].key = ws[rng.IntN(i)].key
				continue
			}
			k := append([]byte(nil), prefix[:rng.IntN(len(prefix)+1)]...)
			if rng.IntN(4) > 0 {
				k = append(k, prefix[len(k):]...)
			}
			for range rng.IntN(14) {
				k = append(k, alphabet[rng.IntN(len(alphabet))])
			}
			ws[i].key = k
		}
		if got, want := keyOrder(ws), keyOrderRef(ws); !slices.Equal(got, want) {
			keys := make([]string, n)
			for i, w := range ws {
				keys[i] = fmt.Sprintf("%x", w.key)
			}
			t.Fatalf("round %d: keys %v: order %v, want %v", round, keys, got, want)
		}
	}
}

// BenchmarkKeyOrder sorts a batch of 10,000 writes of customer keys (a
// restore's batch, a large transaction's), by keyOrder and by its
// definition.
func BenchmarkKeyOrder(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ws := make([]write, 10_000)
	for i := range ws {
		ws[i].key = fmt.Appendf(nil, "%q", fmt.Sprintf("customer-%d", rng.IntN(1_000_000)))
	}
	b.Run("keyOrder", func(b *testing.B) {
		for b.Loop() {
			keyOrder(ws)
		}
	})
	b.Run("definition", func(b *testing.B) {
		for b.Loop() {
			keyOrderRef(ws)
		}
	})
}
