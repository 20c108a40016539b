//go:build !wasip1

package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/record/keyjson"
	"github.com/streamproc/processor/transform/wasm/guest"
)

// Built natively, the SDK's stores are maps: the counting logic is tested
// without WebAssembly.
func TestCount(t *testing.T) {
	guest.ResetStores()
	for i, k := range []string{"a", "b", "a", "a", "b"} {
		out, err := Count(guest.Record{Key: []byte(k), Value: []byte("x")})
		if err != nil || len(out) != 1 {
			t.Fatal(out, err)
		}
		want := map[int]int{0: 1, 1: 1, 2: 2, 3: 3, 4: 2}[i]
		if got := string(out[0].Value); got != fmt.Sprintf(`{"key":%q,"value":%d}`, k, want) || string(out[0].Key) != k {
			t.Errorf("record %d: %s", i, got)
		}
	}
	if _, err := Count(guest.Record{Value: []byte("x")}); err == nil {
		t.Error("a record without a key should fail")
	}
}

// A UTF-8 key is named by the JSON string encoding/json makes, as
// aggregate names it; the old store keys are these strings.
func TestJSONKey(t *testing.T) {
	for _, k := range []string{"", "plain", `q"b\s`, "\x00\x1f\n\r\t\b\f", "<a&b>", "é世\u2028\u2029", "\xff\xfe ok", "\xe2\x82"} {
		want, _ := json.Marshal(k)
		if got := keyjson.AppendString(nil, []byte(k)); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", k, got, want)
		}
	}
}

// Keys as Java's LongSerializer and IntegerSerializer write them (8 and 4
// bytes, big-endian) count apart, 0..9,999 each twice, and each output
// names its key as aggregate does (record.AppendKeyJSON: {"base64": ...}
// for one that is not UTF-8), which reads back to the key.
func TestCountBinaryKeysApart(t *testing.T) {
	guest.ResetStores()
	for round := 1; round <= 2; round++ {
		for i := range 10_000 {
			for _, key := range [][]byte{binary.BigEndian.AppendUint64(nil, uint64(i)), binary.BigEndian.AppendUint32(nil, uint32(i))} {
				out, err := Count(guest.Record{Key: key, Value: []byte("x")})
				if err != nil {
					t.Fatal(err)
				}
				want := `{"key":` + string(record.AppendKeyJSON(nil, key)) + `,"value":` + strconv.Itoa(round) + `}`
				if string(out[0].Value) != want {
					t.Fatalf("%x, round %d: %s, want %s", key, round, out[0].Value, want)
				}
			}
		}
	}
}

// The output names random keys exactly as record.AppendKeyJSON does.
func TestNamedAsAggregate(t *testing.T) {
	guest.ResetStores()
	r := rand.New(rand.NewPCG(38, 7))
	for range 20_000 {
		key := make([]byte, r.IntN(12))
		for i := range key {
			key[i] = []byte{0, 'a', '"', '<', 0xe2, 0x80, 0xa8, 0xff, 0xc3, 0xa9}[r.IntN(10)]
		}
		out, err := Count(guest.Record{Key: key, Value: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Key json.RawMessage }
		if err := json.Unmarshal(out[0].Value, &v); err != nil || string(v.Key) != string(record.AppendKeyJSON(nil, key)) {
			t.Fatalf("%q: named %s, aggregate names it %s (%v)", key, v.Key, record.AppendKeyJSON(nil, key), err)
		}
	}
}

// A count stored by an earlier build under the key's JSON string goes on
// where that string named the key alone, and moves to the new store key;
// keys that merged under U+FFFD start again.
func TestCountReadsOldStoreKeys(t *testing.T) {
	guest.ResetStores()
	for k, n := range map[string]string{`"a"`: "5", `"\ufffd"`: "7"} {
		if err := counts.Put([]byte(k), []byte(n), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ key, want string }{{"a", `"value":6`}, {"a", `"value":7`}, {"\xff", `"value":1`}, {"\ufffd", `"value":1`}} {
		out, err := Count(guest.Record{Key: []byte(c.key), Value: []byte("x")})
		if err != nil || !strings.Contains(string(out[0].Value), c.want) {
			t.Errorf("%q: %s %v, want %s", c.key, out[0].Value, err, c.want)
		}
	}
	if _, ok, _ := counts.Get([]byte(`"a"`)); ok {
		t.Error("a's old entry was not moved")
	}
	if v, ok, _ := counts.Get([]byte(`"\ufffd"`)); !ok || string(v) != "7" {
		t.Errorf("the merged entry changed: %q %v", v, ok)
	}
}
