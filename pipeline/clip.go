package pipeline

import (
	"strconv"
	"unicode/utf8"
)

// maxQuote bounds how much of an error message the processor repeats in
// logs, /healthz and dead-letter headers: transform errors may quote the
// record (jq quotes the value it failed on), which can be megabytes.
const maxQuote = 256

// clip shortens s to maxQuote bytes, saying how long it was.
func clip(s string) string {
	if len(s) <= maxQuote {
		return s
	}
	cut := maxQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... (" + strconv.Itoa(len(s)) + " bytes)"
}

// clippedError is an error whose message was clipped; errors.Is and As
// still see the original.
type clippedError struct {
	msg string
	err error
}

func (e *clippedError) Error() string { return e.msg }

func (e *clippedError) Unwrap() error { return e.err }

// clipErr returns err, or an error with its message clipped to maxQuote.
func clipErr(err error) error {
	if msg := err.Error(); len(msg) > maxQuote {
		return &clippedError{msg: clip(msg), err: err}
	}
	return err
}

// clipTo shortens s to at most n bytes, the note of how long it was
// included, at a rune boundary.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := "... (" + strconv.Itoa(len(s)) + " bytes)"
	cut := max(0, n-len(note))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}
