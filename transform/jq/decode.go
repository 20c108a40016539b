package jq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
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

// parser reads record values straight into gojq's values, byte by byte
// over one copy of the input: every string of the value without escapes
// (names included) is a slice of that copy, and objects and arrays are
// gathered on reused stacks and made once at their final size. It is
// strict: whatever it does not read exactly as encoding/json would
// (invalid JSON, a string with invalid UTF-8, a lone surrogate or a
// control byte, nesting past maxDepth, data after the value) it refuses,
// and the value is parsed again by parseStd, today's encoding/json path:
// what that yields, a value or an error, is the answer. The fast path thus
// only ever answers for values on which both agree.
//
// It replaced a jsontext tokenizer (github.com/go-json-experiment/json)
// that did the same: on a 256-byte order it takes 0.8–1.0× the
// tokenizer's time with the same 23 allocations, which (the maps, a box
// per string and number) are most of what a parse costs
// (docs/benchmarks.md). A parser is used by one goroutine at a time.
type parser struct {
	src   string // the input as a string: strings are slices of it
	pos   int    // the next byte of src to read
	depth int    // objects and arrays open around pos
	keys  []string
	vals  []any
	tmp   []byte // scratch for unquoting
	// room is how many more entries the outermost object's map is made
	// for: the keys a program's steps add to it (steps.grow).
	room int
}

// keepStack is the most entries the parser's stacks keep between values.
const keepStack = 4 << 10

// maxDepth is the deepest nesting encoding/json accepts: a value nested
// deeper is refused by both.
const maxDepth = 10000

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

// fast parses b; false means it refused b, and the caller falls back to
// parseStd.
func (p *parser) fast(b []byte) (v any, ok bool) {
	p.src, p.pos, p.depth = string(b), 0, 0
	v, ok = p.value()
	if ok {
		ok = len(bytes.TrimSpace(b[p.pos:])) == 0
	}
	p.src = ""
	clear(p.keys)
	clear(p.vals)
	p.keys, p.vals = p.keys[:0], p.vals[:0]
	if cap(p.keys) > keepStack || cap(p.vals) > keepStack {
		p.keys, p.vals = nil, nil
	}
	if cap(p.tmp) > keepStack {
		p.tmp = nil
	}
	if !ok {
		v = nil
	}
	return v, ok
}

// space reports the bytes JSON allows between tokens.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// skip moves past white space and returns the next byte, or 0 at the end.
func (p *parser) skip() byte {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if !space[c] {
			return c
		}
		p.pos++
	}
	return 0
}

// value reads the next value.
func (p *parser) value() (any, bool) {
	switch c := p.skip(); c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		s, ok := p.str()
		return s, ok
	case 't':
		return true, p.literal("true")
	case 'f':
		return false, p.literal("false")
	case 'n':
		return nil, p.literal("null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return p.number()
		}
		return nil, false
	}
}

// literal moves past lit if the input has it at pos.
func (p *parser) literal(lit string) bool {
	if !strings.HasPrefix(p.src[p.pos:], lit) {
		return false
	}
	p.pos += len(lit)
	return true
}

// number reads a number as JSON writes it (no leading zeros, digits on
// both sides of a point) and returns its text as a json.Number.
func (p *parser) number() (any, bool) {
	s, i := p.src, p.pos
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = digits(s, i+1)
	default:
		return nil, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(s, i+1)
		if j == i+1 {
			return nil, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return nil, false
		}
		i = j
	}
	n := json.Number(s[p.pos:i])
	p.pos = i
	return n, true
}

// digits returns the index of the first byte of s from i that is not a
// decimal digit.
func digits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// str reads the string at pos: a slice of the input unless it has
// escapes. Plain runs are skipped 8 bytes at a time.
func (p *parser) str() (string, bool) {
	s := p.src
	start := p.pos + 1
	ascii := true
	for i := start; i < len(s); {
		for i+8 <= len(s) && plainWord(word(s[i:])) {
			i += 8
		}
		if i == len(s) {
			break
		}
		switch c := s[i]; {
		case c == '"':
			p.pos = i + 1
			if !ascii && !utf8.ValidString(s[start:i]) {
				return "", false
			}
			return s[start:i], true
		case c == '\\':
			return p.unquote(start, i)
		case c < ' ':
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		i++
	}
	return "", false
}

// unquote reads the rest of a string that has an escape at esc, from its
// first byte at start, into a new string.
func (p *parser) unquote(start, esc int) (string, bool) {
	s := p.src
	b := append(p.tmp[:0], s[start:esc]...)
	i := esc
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			p.tmp = b
			p.pos = i + 1
			if !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		case c < ' ':
			p.tmp = b
			return "", false
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		switch s[i+1] {
		case '"', '\\', '/':
			b = append(b, s[i+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				p.tmp = b
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by a low one is a
				// character; encoding/json repairs the rest.
				r2, ok := rune(0), false
				if r < 0xdc00 && strings.HasPrefix(s[i:], `\u`) {
					r2, ok = hex4(s, i+2)
				}
				if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
					p.tmp = b
					return "", false
				}
				i += 6
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			p.tmp = b
			return "", false
		}
		i += 2
	}
	p.tmp = b
	return "", false
}

// hex4 reads the four hex digits of a \u escape at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// object reads an object: its names and values go on the stacks, and the
// map is made once they are all known.
func (p *parser) object() (any, bool) {
	if p.depth++; p.depth > maxDepth {
		return nil, false
	}
	p.pos++ // {
	base := len(p.keys)
	vbase := len(p.vals)
	if p.skip() == '}' {
		p.pos++
	} else {
		for {
			if p.skip() != '"' {
				return nil, false
			}
			k, ok := p.str()
			if !ok || p.skip() != ':' {
				return nil, false
			}
			p.pos++
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			p.keys = append(p.keys, k)
			p.vals = append(p.vals, v)
			c := p.skip()
			p.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				return nil, false
			}
		}
	}
	keys, vals := p.keys[base:], p.vals[vbase:]
	size := len(keys)
	if p.depth == 1 {
		size += p.room
	}
	m := make(map[string]any, size)
	for i, k := range keys {
		m[k] = vals[i]
	}
	clear(keys)
	clear(vals)
	p.keys, p.vals = p.keys[:base], p.vals[:vbase]
	p.depth--
	return m, true
}

// array reads an array, its elements gathered on the value stack.
func (p *parser) array() (any, bool) {
	if p.depth++; p.depth > maxDepth {
		return nil, false
	}
	p.pos++ // [
	base := len(p.vals)
	if p.skip() == ']' {
		p.pos++
	} else {
		for {
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			p.vals = append(p.vals, v)
			c := p.skip()
			p.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				return nil, false
			}
		}
	}
	a := make([]any, len(p.vals)-base)
	copy(a, p.vals[base:])
	clear(p.vals[base:])
	p.vals = p.vals[:base]
	p.depth--
	return a, true
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
