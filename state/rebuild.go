package state

import (
	"hash/maphash"
	"math/bits"
)

// A partition rebuilt from its changelog's start was wiped first, so
// that before each of the rebuild's batches it holds only the keys the
// rebuild itself wrote. keyFilter remembers those keys in a Bloom filter,
// so that apply looks up a key's previous entry (an iterator seek, a few
// microseconds once the tables outgrow the memtable) only when the
// filter says the rebuild may have written the key: a key the filter
// never had has no entry, which is exactly what the lookup would have
// found. A false positive costs one lookup, never a wrong count or index
// entry, so the filter's size and seed change only the restore's speed,
// and the restored state is the same as the lookup path's.
//
// Its memory is bounded: filterBitsPerRecord bits a changelog record of
// the partition (rounded up to a power of two), within filterBudgetBits
// over every partition a restore rebuilds at once (a changelog larger
// than that is rebuilt with more false positives, that is more lookups).
const (
	filterBitsPerRecord = 10                   // 10 to 20: 1.2% to 0.1% false positives with filterProbes
	filterProbes        = 4                    // bits a key sets and tests
	filterMinBits       = 1 << 12              // 512 bytes
	filterBudgetBits    = 16 << 20 << 3        // 16 MiB over a restore's rebuilt partitions
	filterMaxBits       = filterBudgetBits / 4 // one partition's at most
)

// keyFilter is a Bloom filter of the keys a rebuild wrote to its
// partition.
type keyFilter struct {
	words []uint64
	mask  uint64 // bits - 1, bits a power of two
	seed  maphash.Seed
	// skipped counts the lookups the filter answered (keys it never had).
	skipped int64
}

// newKeyFilter returns an empty filter for a changelog of about records
// records, of at most maxBits bits.
func newKeyFilter(records int64, maxBits uint64) *keyFilter {
	n := uint64(max(records, 1)) * filterBitsPerRecord
	n = 1 << (64 - bits.LeadingZeros64(max(n, filterMinBits)-1)) // rounded up to a power of two
	if top := max(maxBits, filterMinBits); n > top {
		n = 1 << (63 - bits.LeadingZeros64(top)) // its power of two below
	}
	return &keyFilter{words: make([]uint64, n/64), mask: n - 1, seed: maphash.MakeSeed()}
}

// hash is the hash of key whose bits the filter sets and tests.
func (f *keyFilter) hash(key []byte) uint64 { return maphash.Bytes(f.seed, key) }

// has says whether the key of hash h may have been added: false is
// certain.
func (f *keyFilter) has(h uint64) bool {
	step := h>>32 | 1
	for range filterProbes {
		b := h & f.mask
		if f.words[b>>6]&(1<<(b&63)) == 0 {
			return false
		}
		h += step
	}
	return true
}

// add adds the key of hash h.
func (f *keyFilter) add(h uint64) {
	step := h>>32 | 1
	for range filterProbes {
		b := h & f.mask
		f.words[b>>6] |= 1 << (b & 63)
		h += step
	}
}

// clear empties the filter, for a partition wiped again (its changelog's
// start moved past the restore).
func (f *keyFilter) clear() { clear(f.words) }

// filterRebuilds gives every partition of plan that is rebuilt (wiped
// before it is read) a filter sized for its records, within
// filterBudgetBits over them all.
func filterRebuilds(plan map[part]*restoring) {
	n := uint64(0)
	for _, r := range plan {
		if r.rebuilt {
			n++
		}
	}
	if n == 0 {
		return
	}
	share := min(uint64(filterBudgetBits)/n, filterMaxBits)
	for _, r := range plan {
		if r.rebuilt {
			r.seen = newKeyFilter(r.end-r.from, share)
		}
	}
}
