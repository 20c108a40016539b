package record

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// randomKey returns a key of 0 to 24 bytes: random bytes, or random
// runes (valid UTF-8, U+FFFD and escapes included), or a mix.
func randomKey(r *rand.Rand) []byte {
	n := r.IntN(25)
	b := make([]byte, 0, n*4)
	for len(b) < n {
		switch r.IntN(4) {
		case 0:
			b = append(b, byte(r.IntN(256)))
		case 1:
			b = utf8.AppendRune(b, rune(r.IntN(0x11000)))
		case 2:
			b = append(b, []string{`"`, `\`, "<", ">", "&", "\x00", "\x1f", "\ufffd", "\n", "\r", "\t", "\b", "\f", "\u2028", "\u2029", "\x7f"}[r.IntN(16)]...)
		default:
			b = append(b, byte('a'+r.IntN(26)))
		}
	}
	return b
}

// Every key, any bytes, renders as JSON that ParseKeyJSON reads back to
// the same bytes, so two distinct keys never render alike; a valid UTF-8
// key renders as the string encoding/json writes for it.
func TestKeyJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(38, 2))
	seen := map[string]string{}
	for i := range 200_000 {
		key := randomKey(r)
		if i%3 == 0 {
			key = binary.BigEndian.AppendUint64(nil, r.Uint64()>>(r.IntN(64)))
		}
		js := AppendKeyJSON(nil, key)
		if !json.Valid(js) {
			t.Fatalf("%q renders as %s, not JSON", key, js)
		}
		back, err := ParseKeyJSON(js)
		if err != nil || !bytes.Equal(back, key) {
			t.Fatalf("%q renders as %s, which parses as %q, %v", key, js, back, err)
		}
		if prev, ok := seen[string(js)]; ok && prev != string(key) {
			t.Fatalf("%q and %q both render as %s", prev, key, js)
		}
		seen[string(js)] = string(key)
		if utf8.Valid(key) {
			std, _ := json.Marshal(string(key))
			if !bytes.Equal(js, std) {
				t.Fatalf("%q renders as %s, not as encoding/json's %s", key, js, std)
			}
		}
	}
}

// The keys Java's LongSerializer (8 bytes, big-endian) and
// IntegerSerializer (4) write for 0..99,999: every one renders apart, and
// the ones that are not UTF-8 in the base64 form.
func TestKeyJSONJavaSerializers(t *testing.T) {
	seen := map[string]bool{}
	for i := range 100_000 {
		for _, key := range [][]byte{binary.BigEndian.AppendUint64(nil, uint64(i)), binary.BigEndian.AppendUint32(nil, uint32(i))} {
			js := string(AppendKeyJSON(nil, key))
			if seen[js] {
				t.Fatalf("%x renders as %s, as another key did", key, js)
			}
			seen[js] = true
		}
	}
	if got := string(AppendKeyJSON(nil, binary.BigEndian.AppendUint64(nil, 255))); got != `{"base64":"AAAAAAAAAP8="}` {
		t.Errorf("Long 255 renders as %s", got)
	}
	if got := string(AppendKeyJSON(nil, binary.BigEndian.AppendUint32(nil, 7))); got != `"\u0000\u0000\u0000\u0007"` {
		t.Errorf("Integer 7 (valid UTF-8) renders as %s", got)
	}
}

// ParseKeyJSON refuses what is not a key's one rendering.
func TestParseKeyJSONRefuses(t *testing.T) {
	for _, js := range []string{
		``, `null`, `7`, `true`, `[]`, `{}`, `"a"x`, ` "a"`,
		`{"base64":"/w=="`, `{"base64":7}`, `{"base64":"/w==","x":1}`, `{"b64":"/w=="}`,
		`{"base64":"/w"}`,    // no padding
		`{"base64":"YQ=="}`,  // "a" is UTF-8: its rendering is "a"
		`"\u0061"`,           // "a" escaped as encoding/json does not
		`"\ud800"`,           // a lone surrogate: not a key's rendering
		`{ "base64":"/w=="}`, // spaces encoding/json does not write
	} {
		if key, err := ParseKeyJSON([]byte(js)); err == nil {
			t.Errorf("ParseKeyJSON(%s) = %q, want an error", js, key)
		}
	}
	for js, want := range map[string]string{`""`: "", `"a\"b"`: `a"b`, `"\u003c"`: "<", `{"base64":"/w=="}`: "\xff"} {
		if key, err := ParseKeyJSON([]byte(js)); err != nil || string(key) != want {
			t.Errorf("ParseKeyJSON(%s) = %q, %v; want %q", js, key, err, want)
		}
	}
}
