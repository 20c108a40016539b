package keyjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// pieces are what a random text is made of: a letter, every kind of
// byte and rune encoding/json escapes or writes as it is, and bytes that
// are not UTF-8 (a lone continuation byte, a cut sequence, a surrogate).
var pieces = []string{
	"a", "Z0", `"`, `\`, "/", "<", ">", "&", "\x00", "\x1f", "\x7f", "\b", "\f", "\n", "\r", "\t",
	"é", "世", "😀", "\u2028", "\u2029", "\ufffd", "\xff", "\x80", "\xe2\x80", "\xed\xa0\x80",
}

// randomText returns up to 12 random pieces.
func randomText(r *rand.Rand) []byte {
	var b []byte
	for range r.IntN(13) {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return b
}

// AppendString writes, for any bytes, valid UTF-8 or not, as a string or
// a byte slice, the JSON string encoding/json writes.
func TestAppendString(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 7))
	for range 50_000 {
		s := randomText(r)
		want, err := json.Marshal(string(s))
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("%q as []byte: %s, encoding/json writes %s", s, got[1:], want)
		}
		if got := AppendString(nil, string(s)); !bytes.Equal(got, want) {
			t.Fatalf("%q as string: %s, encoding/json writes %s", s, got, want)
		}
	}
}

// Append names a UTF-8 key by its JSON string and any other by the
// base64 of its bytes; the two forms never meet, so keys never share a
// name.
func TestAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 8))
	seen := map[string]string{}
	for range 50_000 {
		key := randomText(r)
		js := Append(nil, key)
		if prev, ok := seen[string(js)]; ok && prev != string(key) {
			t.Fatalf("%q and %q are both named %s", prev, key, js)
		}
		seen[string(js)] = string(key)
		var name any
		if err := json.Unmarshal(js, &name); err != nil {
			t.Fatalf("%q is named %s, not JSON: %v", key, js, err)
		}
		switch n := name.(type) {
		case string:
			if !utf8.Valid(key) || n != string(key) {
				t.Fatalf("%q is named by the string %s", key, js)
			}
		case map[string]any:
			b, err := base64.StdEncoding.DecodeString(n[Base64].(string))
			if utf8.Valid(key) || len(n) != 1 || err != nil || !bytes.Equal(b, key) {
				t.Fatalf("%q is named %s", key, js)
			}
		default:
			t.Fatalf("%q is named %s", key, js)
		}
	}
	if got := string(Append(nil, []byte{0, 0, 0, 0, 0, 0, 0, 0xff})); got != `{"base64":"AAAAAAAAAP8="}` {
		t.Errorf("Long 255 is named %s", got)
	}
}

// Naming a key into a buffer with room allocates nothing, whatever its
// runes: the plugins call it for every record.
func TestAppendAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 256)
	keys := [][]byte{[]byte(`plain "quoted" <&>`), []byte("é世\u2028\ufffd\xff"), {0xff, 0xfe, 0, 1}}
	if n := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			buf = Append(buf[:0], k)
		}
	}); n != 0 {
		t.Errorf("Append allocated %.0f times per run", n)
	}
}
