package aggregate

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform/internal/memstore"
)

// javaKeys returns the keys Java's LongSerializer (8 bytes, big-endian)
// and IntegerSerializer (4) write for 0..n-1.
func javaKeys(n int) [][]byte {
	keys := make([][]byte, 0, 2*n)
	for i := range n {
		keys = append(keys, binary.BigEndian.AppendUint64(nil, uint64(i)), binary.BigEndian.AppendUint32(nil, uint32(i)))
	}
	return keys
}

// Counting by record key over the Long and Integer keys of 0..99,999,
// each twice: every key counts 1 then 2 in its own entry (200,000 of
// them), and each output is keyed by the key's bytes and names it in a
// form that reads back to them.
func TestCountJavaKeysApart(t *testing.T) {
	tr, _ := New(&Settings{Function: "count", Store: "s"})
	stores := memstore.Stores{}
	ctx := stores.Context(context.Background())
	keys := javaKeys(100_000)
	for round := 1; round <= 2; round++ {
		for _, key := range keys {
			out, err := tr.Process(ctx, record.Source{}, &kgo.Record{Key: key, Value: []byte("{}")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Key   json.RawMessage
				Value int
			}
			if err := json.Unmarshal(out[0].Value, &v); err != nil {
				t.Fatalf("%x: output %s: %v", key, out[0].Value, err)
			}
			back, err := record.ParseKeyJSON(v.Key)
			if v.Value != round || err != nil || !bytes.Equal(back, key) || !bytes.Equal(out[0].Key, key) {
				t.Fatalf("%x, round %d: output %x %s (key reads back as %x, %v)", key, round, out[0].Key, out[0].Value, back, err)
			}
		}
	}
	if n := len(stores["s"]); n != len(keys) {
		t.Errorf("the store holds %d entries for %d keys", n, len(keys))
	}
}

// oldStoreKey is the store key of a record key before keys were bytes:
// its JSON string, invalid UTF-8 as U+FFFD.
func oldStoreKey(key string) string {
	js, _ := json.Marshal(key)
	return string(js)
}

// An entry an earlier build wrote under a key's JSON string goes on
// where that string named the key alone (valid UTF-8 without U+FFFD),
// and moves to the new store key in the write; the merged entries of
// keys that were not UTF-8 (and of keys holding U+FFFD, which they
// merged with) are not read: those keys start again, the old entry left
// as it was.
func TestCountReadsOldStoreKeys(t *testing.T) {
	tr, _ := New(&Settings{Function: "count", Store: "s"})
	stores := memstore.Stores{}
	ctx := stores.Context(context.Background())
	st := memstore.Store{
		oldStoreKey("a"):       []byte("5"),
		oldStoreKey("\xff"):    []byte("7"), // "\xff", "\xfe" and "\ufffd" counted together
		oldStoreKey("x\uFFFD"): []byte("4"),
	}
	stores["s"] = st
	for _, c := range []struct {
		key  string
		want int
	}{{"a", 6}, {"a", 7}, {"\xff", 1}, {"\xfe", 1}, {"\ufffd", 1}, {"x\uFFFD", 1}, {"b", 1}} {
		out, err := tr.Process(ctx, record.Source{}, rec(c.key, "{}", time.Unix(1000, 0)), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"key":` + string(record.AppendKeyJSON(nil, []byte(c.key))) + `,"value":` + strconv.Itoa(c.want) + `}`
		if string(out[0].Value) != want {
			t.Errorf("%q: %s, want %s", c.key, out[0].Value, want)
		}
	}
	if _, ok := st[oldStoreKey("a")]; ok || string(st["\x00a"]) != "7" {
		t.Errorf("a's entry did not move: %q", st)
	}
	if string(st[oldStoreKey("\xff")]) != "7" || string(st[oldStoreKey("x\uFFFD")]) != "4" {
		t.Errorf("the merged entries changed: %q", st)
	}
}

// A windowed entry written under the old key ("a"\x00<window start>) goes
// on the same way; in another window the key starts at 1.
func TestWindowReadsOldStoreKeys(t *testing.T) {
	tr, _ := New(&Settings{Function: "count", Window: time.Minute, Store: "s"})
	stores := memstore.Stores{}
	ctx := stores.Context(context.Background())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := memstore.Store{oldStoreKey("a") + "\x00" + strconv.FormatInt(base.UnixMilli(), 10): []byte("3")}
	stores["s"] = st
	for _, c := range []struct {
		at   time.Duration
		want string
	}{{10 * time.Second, `"value":4`}, {20 * time.Second, `"value":5`}, {70 * time.Second, `"value":1`}} {
		out, err := tr.Process(ctx, record.Source{}, rec("a", "{}", base.Add(c.at)), nil)
		if err != nil || !bytes.Contains(out[0].Value, []byte(c.want)) {
			t.Errorf("at %v: %s %v, want %s", c.at, out[0].Value, err, c.want)
		}
	}
	if len(st) != 2 {
		t.Errorf("store %q: want the two windows' new entries only", st)
	}
}
