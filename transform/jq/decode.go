package jq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// ParseValue parses a record value as one JSON value into gojq's values,
// keeping numbers exact: each is a json.Number holding its text as
// written, so a 64-bit id or 1e400 passes through a program unchanged and
// arithmetic sees it as gojq does. A null value (a Kafka tombstone),
// invalid JSON and trailing data are errors.
//
// The values are encoding/json's (Decoder.UseNumber): invalid UTF-8 and
// lone surrogates in strings become U+FFFD, the last of duplicate names
// wins, trailing white space (as bytes.TrimSpace sees it) is allowed.
func ParseValue(b []byte) (any, error) {
	p := parsers.Get().(*parser)
	defer parsers.Put(p)
	return p.parse(b)
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

// parser reads record values with a jsontext tokenizer, straight into
// gojq's values. jsontext is strict where encoding/json repairs (invalid
// UTF-8, lone surrogates) and words its errors its own way, so a value the
// tokenizer refuses is parsed again by parseStd, today's encoding/json
// path: what it yields, a value or an error, is the answer. The fast path
// thus only ever answers for values on which both agree.
//
// On a 256-byte order (2026-12-02, docs/benchmarks.md) the tokenizer path
// took 2.0–2.8 µs against encoding/json's 5.5 µs, and 23 allocations
// against 57: every string of the value (names included) is a slice of one
// copy of the input, and objects and arrays are gathered on reused stacks
// and made once at their final size. Of the libraries measured beside it,
// goccy/go-json's Decoder with UseNumber (4.1 µs) accepts trailing data
// and leading zeros, its Unmarshal (2.4–2.5 µs) has no UseNumber and so
// loses exact numbers, and sonic with UseNumber (2.2–2.5 µs) leaves
// strings pointing into the record's buffer, or with copied strings takes
// 3.8 µs; none is exact and faster enough to pay for a dependency. A
// parser is used by one goroutine at a time.
type parser struct {
	dec  jsontext.Decoder
	buf  bytes.Buffer // the input as the tokenizer reads it, without a copy
	src  string       // the input as a string: strings are slices of it
	keys []string     // names of the objects being read, innermost last
	vals []any        // values of the objects and arrays being read
	tmp  []byte       // scratch for unquoting
}

// keepStack is the most entries the parser's stacks keep between values.
const keepStack = 4 << 10

// parse parses b, on the fast path or else on encoding/json's.
func (p *parser) parse(b []byte) (any, error) {
	if b == nil {
		return nil, errors.New("the value is null (a tombstone), not JSON")
	}
	v, ok := p.fast(b)
	if !ok {
		return parseStd(b)
	}
	return v, nil
}

var decodeOptions = jsontext.AllowDuplicateNames(true)

// fast parses b with the tokenizer; false means the tokenizer refused b
// or data follows the value, and the caller falls back to parseStd.
func (p *parser) fast(b []byte) (v any, ok bool) {
	p.src = string(b)
	p.buf = *bytes.NewBuffer(b)
	p.dec.Reset(&p.buf, decodeOptions)
	v, err := p.value()
	if err == nil {
		end := p.dec.InputOffset()
		ok = len(bytes.TrimSpace(b[end:])) == 0
	}
	p.src = ""
	p.buf = bytes.Buffer{}
	clear(p.keys)
	clear(p.vals)
	p.keys, p.vals = p.keys[:0], p.vals[:0]
	if cap(p.keys) > keepStack || cap(p.vals) > keepStack {
		p.keys, p.vals = nil, nil
	}
	return v, ok
}

// value reads the next value.
func (p *parser) value() (any, error) {
	switch p.dec.PeekKind() {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		raw, err := p.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return p.str(raw)
	case '0':
		raw, err := p.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		end := int(p.dec.InputOffset())
		return json.Number(p.src[end-len(raw) : end]), nil
	}
	tok, err := p.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// str returns the string whose quoted form, raw, was just read: a slice
// of the input unless it has escapes.
func (p *parser) str(raw jsontext.Value) (string, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		end := int(p.dec.InputOffset())
		return p.src[end-len(raw)+1 : end-1], nil
	}
	var err error
	p.tmp, err = jsontext.AppendUnquote(p.tmp[:0], raw)
	return string(p.tmp), err
}

// object reads an object: its names and values go on the stacks, and the
// map is made once they are all known.
func (p *parser) object() (any, error) {
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, err
	}
	base := len(p.keys)
	vbase := len(p.vals)
	for p.dec.PeekKind() != '}' {
		raw, err := p.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		k, err := p.str(raw)
		if err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.keys = append(p.keys, k)
		p.vals = append(p.vals, v)
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, err
	}
	keys, vals := p.keys[base:], p.vals[vbase:]
	m := make(map[string]any, len(keys))
	for i, k := range keys {
		m[k] = vals[i]
	}
	clear(keys)
	clear(vals)
	p.keys, p.vals = p.keys[:base], p.vals[:vbase]
	return m, nil
}

// array reads an array, its elements gathered on the value stack.
func (p *parser) array() (any, error) {
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, err
	}
	base := len(p.vals)
	for p.dec.PeekKind() != ']' {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.vals = append(p.vals, v)
	}
	if _, err := p.dec.ReadToken(); err != nil {
		return nil, err
	}
	a := make([]any, len(p.vals)-base)
	copy(a, p.vals[base:])
	clear(p.vals[base:])
	p.vals = p.vals[:base]
	return a, nil
}

// parseStd is encoding/json's parse (Decoder.UseNumber), the reference
// for the values and the wording of the errors.
func parseStd(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the value is not JSON: %w", err)
	}
	if rest := b[dec.InputOffset():]; len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("the value is not JSON: data after the value at offset %d", dec.InputOffset())
	}
	return v, nil
}
