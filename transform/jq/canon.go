package jq

import (
	"bytes"
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// canon writes what the program "." yields for a record value, byte for
// byte as the parse and the encoder would (names sorted, the last of
// duplicate names kept, white space dropped), straight from the value's
// JSON text: no map, no box, no string is made. It reads only the values
// whose encoding it can be sure of without decoding a string: valid
// UTF-8 without escapes, DEL or control bytes, and nesting of at most
// canonDepth. For anything else, and for an output over its limit, it
// declines and the record takes the parse and the encoder, which give the
// answer (a value, an error, an *transform.OutputLimitError). What it
// writes is never longer than its input, since it drops white space and
// changes nothing else but the order of members.
//
// The input is read once. An object's values are written as they come,
// each member's name and the place of its value noted on a stack; at the
// object's end the members are sorted and the object written again in
// that order, so a value moves once for every object around it, hence the
// bound on the depth. A canon is used by one goroutine at a time.
type canon struct {
	src     []byte
	pos     int
	depth   int
	out     []byte
	tmp     []byte   // an object's values while writeMembers orders them
	members []member // the members of the objects being read, innermost last
}

// member is one member of an object: its name, an offset and length in
// the input (past the opening quote), and where its value was written in
// the output.
type member struct {
	name, nameLen int
	value, end    int
}

// canonDepth is the deepest nesting canon writes: deeper values take the
// parse, since canon copies a value once for every object around it.
const canonDepth = 32

// encode returns the encoding of b for the program ".", in the canon's
// buffer (valid until the next call), and false if canon declines b or
// the encoding is longer than limit.
func (c *canon) encode(b []byte, limit int) ([]byte, bool) {
	c.src, c.pos, c.depth, c.out = b, 0, 0, c.out[:0]
	ok := c.value() && len(bytes.TrimSpace(b[c.pos:])) == 0 && len(c.out) <= limit
	c.src = nil
	c.members = c.members[:0]
	return c.out, ok
}

// reset lets go of buffers that one large value grew: between records a
// canon keeps at most keepBuf bytes of output, as much scratch and
// keepStack members (32 bytes each, 128 KiB).
func (c *canon) reset() {
	if cap(c.out) > keepBuf {
		c.out = nil
	}
	if cap(c.tmp) > keepBuf {
		c.tmp = nil
	}
	if cap(c.members) > keepStack {
		c.members = nil
	}
}

// skip moves past white space and returns the next byte, or 0 at the end.
func (c *canon) skip() byte {
	for c.pos < len(c.src) {
		b := c.src[c.pos]
		if !space[b] {
			return b
		}
		c.pos++
	}
	return 0
}

// value reads and writes the next value.
func (c *canon) value() bool {
	start := c.skip()
	switch start {
	case '{':
		return c.object()
	case '[':
		return c.array()
	}
	from := c.pos
	var ok bool
	switch start {
	case '"':
		ok = c.str()
	case 't':
		ok = c.literal("true")
	case 'f':
		ok = c.literal("false")
	case 'n':
		ok = c.literal("null")
	default:
		ok = c.number()
	}
	c.out = append(c.out, c.src[from:c.pos]...)
	return ok
}

func (c *canon) literal(lit string) bool {
	if !bytes.HasPrefix(c.src[c.pos:], []byte(lit)) {
		return false
	}
	c.pos += len(lit)
	return true
}

// number moves past a number as JSON writes it.
func (c *canon) number() bool {
	s, i := c.src, c.pos
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = digitsBytes(s, i+1)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := digitsBytes(s, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digitsBytes(s, i)
		if j == i {
			return false
		}
		i = j
	}
	c.pos = i
	return true
}

func digitsBytes(s []byte, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// str moves past a string that the encoder writes as it is: printable
// ASCII but '\', and valid UTF-8 beyond ASCII.
func (c *canon) str() bool {
	s := c.src
	start := c.pos + 1
	ascii := true
	for i := start; i < len(s); {
		for i+8 <= len(s) && plainWord(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
		}
		if i == len(s) {
			break
		}
		switch b := s[i]; {
		case b == '"':
			c.pos = i + 1
			return ascii || utf8.Valid(s[start:i])
		case b >= utf8.RuneSelf:
			ascii = false
		case !plain[b]:
			return false
		}
		i++
	}
	return false
}

func (c *canon) array() bool {
	if c.depth++; c.depth > canonDepth {
		return false
	}
	c.pos++ // [
	c.out = append(c.out, '[')
	if c.skip() == ']' {
		c.pos++
	} else {
		for n := 0; ; n++ {
			if n > 0 {
				c.out = append(c.out, ',')
			}
			if !c.value() {
				return false
			}
			b := c.skip()
			c.pos++
			if b == ']' {
				break
			}
			if b != ',' {
				return false
			}
		}
	}
	c.out = append(c.out, ']')
	c.depth--
	return true
}

// object reads an object and writes its values one after the other as
// they come, noting each member's name and where its value went; once
// all are known, writeMembers puts them in order.
func (c *canon) object() bool {
	if c.depth++; c.depth > canonDepth {
		return false
	}
	c.pos++ // {
	start := len(c.out)
	c.out = append(c.out, '{')
	base := len(c.members)
	if c.skip() == '}' {
		c.pos++
	} else {
		for {
			if c.skip() != '"' {
				return false
			}
			name := c.pos + 1
			if !c.str() {
				return false
			}
			nameLen := c.pos - 1 - name
			if c.skip() != ':' {
				return false
			}
			c.pos++
			value := len(c.out)
			if !c.value() {
				return false
			}
			c.members = append(c.members, member{name: name, nameLen: nameLen, value: value, end: len(c.out)})
			b := c.skip()
			c.pos++
			if b == '}' {
				break
			}
			if b != ',' {
				return false
			}
		}
	}
	c.writeMembers(start, base)
	c.members = c.members[:base]
	c.depth--
	return true
}

// name is the name of m.
func (c *canon) name(m member) []byte { return c.src[m.name : m.name+m.nameLen] }

// writeMembers rewrites the object from start in c.out, whose values
// were written there in the order of c.members[base:]: by name, as the
// encoder sorts them, and of members with the same name only the last,
// as the parse keeps it. Nested objects were written whole before, so
// the values are final and only move.
func (c *canon) writeMembers(start, base int) {
	ms := c.members[base:]
	if len(ms) > 16 {
		slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(c.name(a), c.name(b)) })
	} else {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && bytes.Compare(c.name(ms[j]), c.name(ms[j-1])) < 0; j-- {
				ms[j], ms[j-1] = ms[j-1], ms[j]
			}
		}
	}
	c.tmp = append(c.tmp[:0], c.out[start:]...)
	c.out = append(c.out[:start], '{')
	first := true
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(c.name(m), c.name(ms[i+1])) {
			continue
		}
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		c.out = append(c.out, '"')
		c.out = append(c.out, c.name(m)...)
		c.out = append(c.out, '"', ':')
		c.out = append(c.out, c.tmp[m.value-start:m.end-start]...)
	}
	c.out = append(c.out, '}')
}
