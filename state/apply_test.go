package state

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestApplyProperty holds apply to a model: random batches of writes
// (repeated keys, deletions, expiries kept, changed and removed, as a
// restore's batches have them) leave the data, the expiry index and the
// counts exactly as a map of the last value of each key says.
func TestApplyProperty(t *testing.T) {
	l, err := openLocal(filepath.Join(t.TempDir(), "state"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	p := part{"t", 3}
	type entry struct {
		exp int64
		val string
	}
	model := map[string]entry{}
	rng := rand.New(rand.NewPCG(1, 2))
	var st partState
	for batch := range 200 {
		var ws []write
		for range rng.IntN(300) {
			k := fmt.Sprintf("k%03d", rng.IntN(400))
			if rng.IntN(4) == 0 {
				ws = append(ws, write{key: []byte(k)})
				delete(model, k)
				continue
			}
			e := entry{exp: int64(rng.IntN(4)) * 1000, val: fmt.Sprint(rng.IntN(1000))}
			ws = append(ws, write{key: []byte(k), enc: encodeValue(e.exp, []byte(e.val))})
			model[k] = e
		}
		sts, err := l.apply([]partWrites{{p: p, writes: ws, cp: checkpoint{next: int64(batch)}, before: st}}, false)
		if err != nil {
			t.Fatal(err)
		}
		st = sts[0]
		data, index := map[string]entry{}, map[string]bool{}
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: p.prefix(), UpperBound: append(p.prefix(), 0xff)})
		if err != nil {
			t.Fatal(err)
		}
		pre := p.prefix()
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()[len(pre):]
			switch k[0] {
			case kindData:
				data[string(k[1:])] = entry{exp: expiryOf(it.Value()), val: string(it.Value()[8:])}
			case kindExpiry:
				index[fmt.Sprint(int64(binary.BigEndian.Uint64(k[1:9])), string(k[9:]))] = true
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		wantIndex, bytesN := map[string]bool{}, int64(0)
		for k, e := range model {
			if e.exp != 0 {
				wantIndex[fmt.Sprint(e.exp, k)] = true
			}
			bytesN += int64(len(k) + len(e.val))
			if data[k] != e {
				t.Fatalf("batch %d: key %s = %+v, want %+v", batch, k, data[k], e)
			}
		}
		if len(data) != len(model) || len(index) != len(wantIndex) {
			t.Fatalf("batch %d: %d keys and %d index entries, want %d and %d", batch, len(data), len(index), len(model), len(wantIndex))
		}
		for k := range wantIndex {
			if !index[k] {
				t.Fatalf("batch %d: index entry %s missing", batch, k)
			}
		}
		if st.keys != int64(len(model)) || st.bytes != bytesN {
			t.Fatalf("batch %d: counts %d keys %d bytes, want %d and %d", batch, st.keys, st.bytes, len(model), bytesN)
		}
	}
}
