package dedupe

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform/internal/memstore"
)

// By record key over the Long and Integer keys of 0..99,999 (the bytes
// Java's LongSerializer and IntegerSerializer write), each sent twice:
// every one of the 200,000 distinct ids passes once, its repeat is
// filtered.
func TestDedupeJavaKeysApart(t *testing.T) {
	tr, _ := New(&Settings{Window: time.Hour, Store: "d"})
	stores := memstore.Stores{}
	ctx := stores.Context(context.Background())
	at := time.Unix(100000, 0)
	for round := range 2 {
		passed := 0
		for i := range 100_000 {
			for _, key := range [][]byte{binary.BigEndian.AppendUint64(nil, uint64(i)), binary.BigEndian.AppendUint32(nil, uint32(i))} {
				out, err := tr.Process(ctx, record.Source{}, &kgo.Record{Key: key, Value: []byte("x"), Timestamp: at}, nil)
				if err != nil {
					t.Fatal(err)
				}
				passed += len(out)
			}
		}
		if want := []int{200_000, 0}[round]; passed != want {
			t.Errorf("round %d: %d ids passed, want %d", round, passed, want)
		}
	}
	if n := len(stores["d"]); n != 200_000 {
		t.Errorf("the store holds %d ids, want 200,000", n)
	}
}

// An id an earlier build stored under the key's JSON string still filters
// its duplicates where that string named it alone, and moves to the new
// store key when the id passes again; ids that were not UTF-8, merged
// under U+FFFD, are judged on their own.
func TestDedupeReadsOldStoreKeys(t *testing.T) {
	tr, _ := New(&Settings{Window: time.Hour, Store: "d"})
	stores := memstore.Stores{}
	ctx := stores.Context(context.Background())
	base := time.Unix(100000, 0)
	seen := binary.BigEndian.AppendUint64(nil, uint64(base.UnixMilli()))
	old := func(key string) string { js, _ := json.Marshal(key); return string(js) }
	st := memstore.Store{old("a"): seen, old("\xff"): seen}
	stores["d"] = st
	for i, c := range []struct {
		key  string
		at   time.Duration
		pass bool
	}{
		{"a", time.Minute, false},
		{"\xfe", time.Minute, true}, // merged with "\xff" before: its own id now
		{"\xff", time.Minute, true},
		{"\xff", 2 * time.Minute, false},
		{"a", time.Hour, true}, // the old sighting's window is over
		{"a", time.Hour + time.Minute, false},
	} {
		out, err := tr.Process(ctx, record.Source{}, &kgo.Record{Key: []byte(c.key), Timestamp: base.Add(c.at)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(out) == 1; got != c.pass {
			t.Errorf("record %d (%q at +%s): passed %v, want %v", i, c.key, c.at, got, c.pass)
		}
	}
	if _, ok := st[old("a")]; ok {
		t.Errorf("a's old entry was not moved: %q", st)
	}
	if _, ok := st["\x00a"]; !ok {
		t.Errorf("a has no new entry: %q", st)
	}
}
