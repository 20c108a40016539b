package pipeline

import "github.com/streamproc/processor/record"

// maxQuote bounds how much of an error message the processor repeats in
// logs, /healthz and dead-letter headers: transform errors may quote the
// record (jq quotes the value it failed on), which can be megabytes.
const maxQuote = 256

// clip shortens s to maxQuote bytes, saying how long it was.
func clip(s string) string { return record.Clip(s, maxQuote) }

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
