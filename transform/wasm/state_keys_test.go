package wasm

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Through the host's store functions, keys that are not UTF-8 (Java's
// LongSerializer and IntegerSerializer keys of 0..299) reach the store as
// their bytes: each counts apart, 600 entries, and each output names its
// key as aggregate does.
func TestWasmStateCountBinaryKeys(t *testing.T) {
	tr := newTest(t, count, withStores("counts"))
	st := newStores("counts")
	ctx := st.ctx()
	for round := 1; round <= 2; round++ {
		for i := range 300 {
			for _, key := range [][]byte{binary.BigEndian.AppendUint64(nil, uint64(i)), binary.BigEndian.AppendUint32(nil, uint32(i))} {
				out, err := tr.Process(ctx, testSrc, &kgo.Record{Key: key, Value: []byte("x")}, nil)
				if err != nil {
					t.Fatal(err)
				}
				want := `{"key":` + string(record.AppendKeyJSON(nil, key)) + `,"value":` + strconv.Itoa(round) + `}`
				if string(out[0].Value) != want || !bytes.Equal(out[0].Key, key) {
					t.Fatalf("%x, round %d: %x %s, want %s", key, round, out[0].Key, out[0].Value, want)
				}
			}
		}
	}
	if n := len(st.stores["counts"].m); n != 600 {
		t.Errorf("the store holds %d entries for 600 keys", n)
	}
}
