package record

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Cut keeps text of up to n bytes, and otherwise the longest prefix that
// does not split a rune, down to nothing when no rune starts in reach.
func TestCutAtRuneBoundaries(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abc", 5, "abc"},
		{"abcd", 3, "abc"},
		{"abé", 3, "ab"},            // é is 2 bytes: 3 would split it
		{"abé", 4, "abé"},           // exactly fits
		{"a€b", 2, "a"},             // € is 3 bytes
		{"a€b", 4, "a€"},            // the cut falls right after it
		{"😀x", 3, ""},               // a 4-byte rune, nothing before it
		{"\x80\x80\x80\x80", 2, ""}, // no rune starts anywhere
		{"abc", 0, ""},
		{"abc", -1, ""},
	} {
		got := Cut(c.s, c.n)
		if got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
		if len(got) > max(c.n, 0) && got != c.s {
			t.Errorf("Cut(%q, %d) = %q, longer than %d bytes", c.s, c.n, got, c.n)
		}
		if utf8.ValidString(c.s) && !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, not valid UTF-8", c.s, c.n, got)
		}
	}
}

// Clip keeps text of up to n bytes; a longer one is cut at a rune boundary
// at or below n and says how long it was, the note beyond the n bytes.
func TestClip(t *testing.T) {
	const n = 256
	exact := strings.Repeat("a", n)
	if got := Clip(exact, n); got != exact {
		t.Errorf("Clip of %d bytes changed it to %q", n, got)
	}
	long := strings.Repeat("b", n+1)
	if got, want := Clip(long, n), strings.Repeat("b", n)+"... (257 bytes)"; got != want {
		t.Errorf("Clip of 257 bytes = %q, want %q", got, want)
	}
	// "é" is two bytes; 255 ASCII bytes put one across the cut.
	multi := strings.Repeat("c", n-1) + "éééé"
	got := Clip(multi, n)
	if want := strings.Repeat("c", n-1) + "... (" + strconv.Itoa(len(multi)) + " bytes)"; got != want {
		t.Errorf("Clip across a rune = %q, want %q", got, want)
	}
	if !utf8.ValidString(got) {
		t.Errorf("Clip produced invalid UTF-8: %q", got)
	}
	cont := strings.Repeat("\x80", 300)
	if got := Clip(cont, n); got != "... (300 bytes)" {
		t.Errorf("Clip of 300 continuation bytes = %q, want %q", got, "... (300 bytes)")
	}
}

// ClipWithin fits the whole, note included, in n bytes, at a rune
// boundary; below the note's length only the note is left.
func TestClipWithin(t *testing.T) {
	if got := ClipWithin("short", 5); got != "short" {
		t.Errorf("ClipWithin of 5 bytes in 5 = %q", got)
	}
	s := strings.Repeat("é", 100) // 200 bytes
	for _, n := range []int{199, 100, 51, 50, 16, 15, 3, 0} {
		got := ClipWithin(s, n)
		if !strings.HasSuffix(got, "... (200 bytes)") {
			t.Errorf("ClipWithin(%d) = %q, without the note", n, got)
		}
		if note := len("... (200 bytes)"); len(got) > max(n, note) {
			t.Errorf("ClipWithin(%d) = %q, %d bytes", n, got, len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("ClipWithin(%d) = %q, not valid UTF-8", n, got)
		}
	}
	if got, want := ClipWithin(s, 50), strings.Repeat("é", 17)+"... (200 bytes)"; got != want {
		t.Errorf("ClipWithin(50) = %q, want %q", got, want)
	}
}
