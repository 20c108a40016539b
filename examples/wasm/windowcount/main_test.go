//go:build !wasip1

package main

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/streamproc/processor/transform/wasm/guest"
)

// Built natively, the SDK's stores are maps and nothing closes by itself:
// the test closes a window's entry by calling Closed, as the host does
// once the stream time reaches its expiry. Records count into their
// key's window, a late one counts nowhere, and the closed window emits
// its count with the lineage of its last input.
func TestWindowCount(t *testing.T) {
	guest.ResetStores()
	defer guest.SetStreamTime(-1)
	const start = 1_800_000_000_000 - 1_800_000_000_000%window
	stream := int64(0)
	for i, ts := range []int64{start + 5, start + 59_999, start + 20_000, start + 61_000} {
		stream = max(stream, ts)
		guest.SetStreamTime(stream)
		out, err := Count(guest.Record{Key: []byte("k"), Timestamp: ts, Source: guest.Source{Offset: int64(10 + i)}})
		if err != nil || len(out) != 0 {
			t.Fatalf("record %d: %d outputs, %v; want none", i, len(out), err)
		}
	}
	guest.SetStreamTime(start + window + grace) // the first window closes
	if out, err := Count(guest.Record{Key: []byte("k"), Timestamp: start + 1, Source: guest.Source{Offset: 14}}); err != nil || len(out) != 0 {
		t.Fatalf("a late record: %d outputs, %v", len(out), err)
	}
	key := append(binary.BigEndian.AppendUint64(nil, uint64(start)), 'k')
	v, ok, err := windows.Get(key)
	if err != nil || !ok || string(v) != "3 12" {
		t.Fatalf("the first window's entry: %q, %v, %v; want 3 inputs, the last at offset 12", v, ok, err)
	}
	out, lineage, err := Closed(guest.Closing{Store: "windows", Key: key, Value: v, Expiry: start + window + grace})
	if err != nil || len(out) != 1 || lineage != 12 {
		t.Fatalf("Closed: %d outputs, lineage %d, %v", len(out), lineage, err)
	}
	var got struct {
		Key   string `json:"key"`
		Value int    `json:"value"`
		Start string `json:"window_start"`
	}
	if err := json.Unmarshal(out[0].Value, &got); err != nil || got.Key != "k" || got.Value != 3 || got.Start != "2027-01-15T08:00:00Z" ||
		string(out[0].Key) != "k@1800000000000" || out[0].Timestamp != start+window-1 {
		t.Fatalf("Closed emitted %s %s at %d (%v)", out[0].Key, out[0].Value, out[0].Timestamp, err)
	}
	if _, _, err := Closed(guest.Closing{Key: key, Value: []byte("3")}); err == nil {
		t.Error("an entry without its offset closed")
	}
}
