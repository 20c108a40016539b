package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
)

// keyOrder returns the indices of ws in the order of their keys; of
// writes of one key (a restore's batch has them) in their order in ws, so
// that the last is the one that counts. Sorting indices moves a few bytes
// a swap, not a write.
//
// Each index carries the 8 bytes of its key that follow the prefix all
// the keys share (a batch's keys often share one: "customer-" and the
// like), as a number, its word. The indices are sorted by their words, a
// byte of the word a pass (radixSort), which keeps indices of equal words
// in their order; only a run of equal words compares the keys' bytes. A
// rebuild's batches of a million keys had spent an eighth of the
// processor's CPU in a comparison sort of the keys, and a tenth in one of
// the words.
func keyOrder(ws []write) []int32 {
	shared := sharedPrefix(ws)
	es := make([]keyEntry, len(ws))
	for i := range ws {
		es[i] = keyEntry{keyWord(ws[i].key, shared), int32(i)}
	}
	if len(es) < radixMin {
		slices.SortFunc(es, func(x, y keyEntry) int { // equal words in index order, as radixSort leaves them
			if c := cmp.Compare(x.word, y.word); c != 0 {
				return c
			}
			return cmp.Compare(x.i, y.i)
		})
	} else {
		es = radixSort(es)
	}
	// Equal words: keys that agree on those bytes, or that end within
	// them (a shorter key reads as zeros there).
	for lo := 0; lo < len(es); {
		hi := lo + 1
		for hi < len(es) && es[hi].word == es[lo].word {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(es[lo:hi], func(x, y keyEntry) int {
				if c := bytes.Compare(ws[x.i].key, ws[y.i].key); c != 0 {
					return c
				}
				return cmp.Compare(x.i, y.i)
			})
		}
		lo = hi
	}
	order := make([]int32, len(es))
	for i := range es {
		order[i] = es[i].i
	}
	return order
}

// keyEntry is an index of keyOrder with its key's word.
type keyEntry struct {
	word uint64
	i    int32
}

// radixMin is the batch from which keyOrder sorts by radix: below it a
// comparison sort is as quick and allocates nothing more.
const radixMin = 256

// radixSort sorts es by word, stably: a counting pass a byte of the word,
// the lowest first, skipping a byte every entry has alike (a batch's
// words share their high bytes when its keys share more than the common
// prefix). It returns the sorted entries, es or a buffer of its length.
func radixSort(es []keyEntry) []keyEntry {
	var counts [8][256]int
	for _, e := range es {
		w := e.word
		for b := range 8 {
			counts[b][byte(w>>(8*b))]++
		}
	}
	src, dst := es, make([]keyEntry, len(es))
	for b := range 8 {
		c := &counts[b]
		shift := 8 * b
		if c[byte(src[0].word>>shift)] == len(src) {
			continue // one value of this byte: nothing moves
		}
		sum := 0
		for v, n := range c {
			c[v] = sum
			sum += n
		}
		for _, e := range src {
			v := byte(e.word >> shift)
			dst[c[v]] = e
			c[v]++
		}
		src, dst = dst, src
	}
	return src
}

// sharedPrefix is the length of the prefix every key of ws has.
func sharedPrefix(ws []write) int {
	if len(ws) == 0 {
		return 0
	}
	first := ws[0].key
	n := len(first)
	for i := 1; i < len(ws) && n > 0; i++ {
		k := ws[i].key
		n = min(n, len(k))
		for j := 0; j < n; j++ {
			if k[j] != first[j] {
				n = j
				break
			}
		}
	}
	return n
}

// keyWord is the 8 bytes of key from offset at on, big-endian, zeros
// past the key's end: words in order are keys in order, and keys whose
// words are equal need their bytes compared.
func keyWord(key []byte, at int) uint64 {
	var b [8]byte
	copy(b[:], key[at:])
	return binary.BigEndian.Uint64(b[:])
}
