//go:build !wasip1

package main

import (
	"encoding/json"
	"fmt"
	"testing"

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

// Keys are the JSON strings encoding/json makes, as aggregate's are.
func TestJSONKey(t *testing.T) {
	for _, k := range []string{"", "plain", `q"b\s`, "\x00\x1f\n\r\t", "<a&b>", "é世\u2028\u2029", "\xff\xfe ok", "\xe2\x82"} {
		want, _ := json.Marshal(k)
		if got := appendJSONString(nil, []byte(k)); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", k, got, want)
		}
	}
}
