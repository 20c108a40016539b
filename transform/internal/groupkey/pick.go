package groupkey

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/streamproc/processor/transform/internal/jqpath"
	"github.com/streamproc/processor/transform/jq"
)

// A stage whose FIELD and BY are all paths of constant keys reads only
// the members of the value's top-level object that the paths begin
// with: .amount_cents and .customer_id of a 256-byte order. Parsing the
// whole value (jq.ParseValue) builds every member, a map and a box per
// string and number, most of the CPU of such a record. Parse instead
// scans the value once, checking that it is JSON as strictly as the
// parse would take it, and parses only those members' texts: a *Picked.
// Whatever the scan is not sure of (a value that is not an object, a
// top-level name with an escape, a picked name twice, invalid UTF-8,
// nesting past pickDepth, invalid JSON) it leaves to jq.ParseValue,
// whose value, or error, is then the answer; so is the full parse for an
// expression that cannot be read from the picked members (Expr.First).
// TestPickAsParse holds the two to each other.

// pickDepth bounds the nesting the scan follows; a deeper value is
// parsed in full (encoding/json's own bound is 10,000).
const pickDepth = 512

// Picker parses record values for a set of expressions.
type Picker struct {
	keys []string // the top-level names the expressions begin with; nil: parse in full
}

// NewPicker returns the Picker for exprs (nil ones are skipped): it picks
// members when every expression is a path of constant keys.
func NewPicker(exprs ...*Expr) *Picker {
	p := &Picker{keys: []string{}}
	for _, e := range exprs {
		if e == nil {
			continue
		}
		if e.path == nil {
			return &Picker{}
		}
		if !contains(p.keys, e.path[0]) {
			p.keys = append(p.keys, e.path[0])
		}
	}
	return p
}

func contains(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// Picked is a record value of which only some top-level members were
// parsed (Picker.Parse): a value for Expr.First and By.Key.
type Picked struct {
	raw  []byte
	keys []string
	vals []any // per keys: the member's value, nil when missing
}

// Parse returns value as Expr.First reads it: a *Picked, or the value
// parsed in full (jq.ParseValue, with its errors).
func (p *Picker) Parse(value []byte) (any, error) {
	if p.keys == nil || value == nil {
		return jq.ParseValue(value)
	}
	s := scanner{src: value, keys: p.keys, at: make([]int, 2*len(p.keys))}
	if !s.document() {
		return jq.ParseValue(value)
	}
	pk := &Picked{raw: value, keys: p.keys, vals: make([]any, len(p.keys))}
	for i := range p.keys {
		if s.at[2*i+1] == 0 {
			continue // missing: null
		}
		v, err := member(value[s.at[2*i]:s.at[2*i+1]])
		if err != nil {
			return jq.ParseValue(value) // not expected after the scan: the full parse decides
		}
		pk.vals[i] = v
	}
	return pk, nil
}

// member parses a member's text, which the scan found valid: a number
// is its text as a json.Number and a string of printable ASCII without
// escapes its bytes, as jq.ParseValue makes them; the rest goes through
// jq.ParseValue.
func member(b []byte) (any, error) {
	switch c := b[0]; {
	case c == '-' || '0' <= c && c <= '9':
		return json.Number(b), nil
	case c == '"' && plainASCII(b[1:len(b)-1]):
		return string(b[1 : len(b)-1]), nil
	}
	return jq.ParseValue(b)
}

// plainASCII reports whether b is printable ASCII without a backslash.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < ' ' || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// get is the value at path in p when its first key is picked.
func (p *Picked) get(path []string) (any, bool) {
	for i, k := range p.keys {
		if k == path[0] {
			return jqpath.Get(p.vals[i], path[1:])
		}
	}
	return nil, false
}

// scanner checks a JSON text and finds the values of some of its
// top-level object's members, allocating nothing.
type scanner struct {
	src   []byte
	pos   int
	depth int
	keys  []string
	at    []int // per key: the start and end of its value in src; end 0: not seen
}

// document scans the whole text: an object, and nothing but space after.
func (s *scanner) document() bool {
	if s.skip() != '{' {
		return false
	}
	if !s.object(true) {
		return false
	}
	s.skip()
	return s.pos == len(s.src)
}

// skip moves past white space and returns the next byte, or 0 at the end.
func (s *scanner) skip() byte {
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; c {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return c
		}
	}
	return 0
}

// value scans the value at pos.
func (s *scanner) value() bool {
	switch c := s.skip(); c {
	case '{':
		return s.object(false)
	case '[':
		return s.array()
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

// object scans the object at pos; top: record the picked members.
func (s *scanner) object(top bool) bool {
	if s.depth++; s.depth > pickDepth {
		return false
	}
	s.pos++ // '{'
	if s.skip() == '}' {
		s.pos++
		s.depth--
		return true
	}
	for {
		if s.skip() != '"' {
			return false
		}
		start := s.pos + 1
		escaped, ok := s.str()
		if !ok || (top && escaped) {
			return false
		}
		name := s.src[start : s.pos-1]
		if s.skip() != ':' {
			return false
		}
		s.pos++
		s.skip()
		from := s.pos
		if !s.value() {
			return false
		}
		if top && !s.note(name, from) {
			return false
		}
		switch s.skip() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// note records the value from..pos of the member name when it is
// picked; not ok for a picked name seen twice.
func (s *scanner) note(name []byte, from int) bool {
	for i, k := range s.keys {
		if k == string(name) {
			if s.at[2*i+1] != 0 {
				return false
			}
			s.at[2*i], s.at[2*i+1] = from, s.pos
		}
	}
	return true
}

// array scans the array at pos.
func (s *scanner) array() bool {
	if s.depth++; s.depth > pickDepth {
		return false
	}
	s.pos++ // '['
	if s.skip() == ']' {
		s.pos++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		switch s.skip() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// literal moves past lit if the text has it at pos.
func (s *scanner) literal(lit string) bool {
	if len(s.src)-s.pos < len(lit) || string(s.src[s.pos:s.pos+len(lit)]) != lit {
		return false
	}
	s.pos += len(lit)
	return true
}

// number moves past a number as JSON writes it.
func (s *scanner) number() bool {
	b, i := s.src, s.pos
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digitsAt(b, i+1)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digitsAt(b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsAt(b, i)
		if j == i {
			return false
		}
		i = j
	}
	s.pos = i
	return true
}

func digitsAt(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// str moves past the string at pos, which must be valid UTF-8 with valid
// escapes, and reports whether it has an escape.
func (s *scanner) str() (escaped, ok bool) {
	b := s.src
	start := s.pos + 1
	ascii := true
	for i := start; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			s.pos = i + 1
			return escaped, ascii || utf8.Valid(b[start:i])
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return escaped, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+6 > len(b) || !hex(b[i+2]) || !hex(b[i+3]) || !hex(b[i+4]) || !hex(b[i+5]) {
					return escaped, false
				}
				i += 5
			default:
				return escaped, false
			}
		case c < ' ':
			return escaped, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return escaped, false
}

func hex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
