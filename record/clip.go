package record

import (
	"strconv"
	"unicode/utf8"
)

// Text the processor repeats in a header, a log line or /healthz (an error
// message above all: a transform's error may quote the record, which can
// be megabytes) is clipped to a bound. Every clip cuts at a UTF-8 rune
// boundary, so that the result stays valid text when s was; they differ
// only in the marker they leave.

// Cut returns the longest prefix of s of at most n bytes that does not end
// inside a rune: s itself when it has at most n bytes. A negative n counts
// as 0. Nothing marks the cut.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Clip returns s when it has at most n bytes; otherwise Cut(s, n) followed
// by a note of how long s was, "... (N bytes)". The note comes on top of
// the n bytes: use ClipWithin when the whole must fit n.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Cut(s, n) + lengthNote(len(s))
}

// ClipWithin is Clip with the note counted in n: the result has at most n
// bytes, or only the note when n is smaller than it.
func ClipWithin(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := lengthNote(len(s))
	return Cut(s, n-len(note)) + note
}

// lengthNote is the marker of a clip: "... (N bytes)".
func lengthNote(n int) string { return "... (" + strconv.Itoa(n) + " bytes)" }
