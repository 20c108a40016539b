package groupkey

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform/jq"
)

// randomBytes returns a key of 0 to 20 bytes, random or UTF-8 or a mix,
// with U+FFFD and the prefix bytes often.
func randomBytes(r *rand.Rand) []byte {
	n := r.IntN(21)
	b := make([]byte, 0, n*4)
	for len(b) < n {
		switch r.IntN(4) {
		case 0:
			b = append(b, byte(r.IntN(256)))
		case 1:
			b = utf8.AppendRune(b, rune(r.IntN(0x11000)))
		case 2:
			b = append(b, []byte{0, 1, '"', 0xef, 0xbf, 0xbd, 0xff}[r.IntN(7)])
		default:
			b = append(b, byte('0'+r.IntN(10)))
		}
	}
	return b
}

// Distinct record keys never share a store key, windowed or not, nor
// with a BY value's; each key's JSON renders it reversibly; Legacy is
// the old store key (the JSON string, U+FFFD for invalid bytes) exactly
// where that named no other key.
func TestRecordKeysNeverCollide(t *testing.T) {
	r := rand.New(rand.NewPCG(38, 9))
	owner := map[string]string{} // store key -> what it belongs to
	claim := func(store []byte, who string) {
		t.Helper()
		if prev, ok := owner[string(store)]; ok && prev != who {
			t.Fatalf("store key %q belongs to %s and to %s", store, prev, who)
		}
		owner[string(store)] = who
	}
	by, err := Compile(".k")
	if err != nil {
		t.Fatal(err)
	}
	start := time.UnixMilli(1_700_000_000_000)
	for range 100_000 {
		key := randomBytes(r)
		if r.IntN(4) == 0 {
			key = binary.BigEndian.AppendUint64(nil, uint64(r.IntN(1_000_000)))
		}
		k, err := RecordKey(key)
		if err != nil {
			t.Fatal(err)
		}
		who := "record key " + string(k.JSON)
		claim(k.Store, who)
		claim(k.Window(start).Store, who+" windowed")
		claim(k.Window(start.Add(time.Minute)).Store, who+" windowed +1m")
		if back, err := record.ParseKeyJSON(k.JSON); err != nil || !bytes.Equal(back, key) || !bytes.Equal(k.Out, key) {
			t.Fatalf("%q: JSON %s parses as %q, %v; Out %q", key, k.JSON, back, err, k.Out)
		}
		old, _ := json.Marshal(string(key))
		unambiguous := utf8.Valid(key) && !bytes.ContainsRune(key, utf8.RuneError)
		if unambiguous != (k.Legacy() != nil) || (k.Legacy() != nil && !bytes.Equal(k.Legacy(), old)) {
			t.Fatalf("%q: Legacy %q, the old store key %s", key, k.Legacy(), old)
		}
		if w := k.Window(start).Legacy(); unambiguous && string(w) != string(old)+"\x00"+strconv.FormatInt(start.UnixMilli(), 10) {
			t.Fatalf("%q: windowed Legacy %q", key, w)
		}
		// A BY value that is the key's text (or the key's bytes as a
		// number's digits) is another group: its store key is its JSON.
		if utf8.Valid(key) {
			v := map[string]any{"k": string(key)}
			bk, err := by.Key(context.Background(), &kgo.Record{}, v)
			if err != nil {
				t.Fatal(err)
			}
			claim(bk.Store, "BY "+string(bk.JSON))
			claim(bk.Window(start).Store, "BY "+string(bk.JSON)+" windowed")
			if bk.Legacy() != nil || !bytes.Equal(bk.Store, old) {
				t.Fatalf("BY %q: store key %q, legacy %q; want the JSON %s as before", key, bk.Store, bk.Legacy(), old)
			}
		}
	}
}

// A null record key has no group key; an empty one has.
func TestRecordKeyNullAndEmpty(t *testing.T) {
	if _, err := RecordKey(nil); err == nil {
		t.Error("a null key grouped")
	}
	k, err := RecordKey([]byte{})
	if err != nil || string(k.Store) != "\x00" || string(k.JSON) != `""` || string(k.Legacy()) != `""` {
		t.Errorf("the empty key: %+v, %v", k, err)
	}
}

// The store keys of the keys Java's LongSerializer and
// IntegerSerializer write for 0..99,999 are 200,000 distinct ones: the
// store key is the key's bytes (with the prefix).
func TestJavaSerializerKeysApart(t *testing.T) {
	seen := make(map[string]bool, 200_000)
	for i := range 100_000 {
		for _, key := range [][]byte{binary.BigEndian.AppendUint64(nil, uint64(i)), binary.BigEndian.AppendUint32(nil, uint32(i))} {
			k, _ := RecordKey(key)
			if seen[string(k.Store)] || !bytes.Equal(k.Store[1:], key) || k.Store[0] != RawPrefix {
				t.Fatalf("%x: store key %x", key, k.Store)
			}
			seen[string(k.Store)] = true
		}
	}
}

// A BY value's store key is its JSON as documented: an object's members
// sorted (two orders, one key), a number as written (1 and 1.0 apart),
// a string apart from the number of its text.
func TestByValueJSON(t *testing.T) {
	by, err := Compile(".c")
	if err != nil {
		t.Fatal(err)
	}
	store := func(value string) string {
		t.Helper()
		v, err := jq.ParseValue([]byte(`{"c":` + value + `}`))
		if err != nil {
			t.Fatal(err)
		}
		k, err := by.Key(context.Background(), &kgo.Record{}, v)
		if err != nil {
			t.Fatal(err)
		}
		return string(k.Store)
	}
	for _, c := range []struct{ a, b string }{{`{"b":1,"a":"<"}`, `{"a":"<","b":1}`}} {
		if store(c.a) != store(c.b) {
			t.Errorf("%s and %s: two store keys", c.a, c.b)
		}
	}
	for _, c := range []struct{ a, b string }{{`1`, `1.0`}, {`1`, `"1"`}, {`"a"`, `["a"]`}} {
		if store(c.a) == store(c.b) {
			t.Errorf("%s and %s: one store key", c.a, c.b)
		}
	}
	if got := store(`{"b":1,"a":"<"}`); got != `{"a":"\u003c","b":1}` {
		t.Errorf("store key %s", got)
	}
}
