package jq

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// encoder writes jq results as JSON, byte for byte as gojq.Marshal does
// (NaN as null, infinities as ±math.MaxFloat64, \b and \f in strings, '<',
// '>' and '&' unescaped, object keys sorted), but into a buffer it reuses
// and with a limit: it stops as soon as the encoding passes it. A result
// may be small in memory and huge as JSON (an array holding one large
// object a thousand times is a thousand pointers to gojq, a thousand
// copies to JSON), and gojq.Marshal would build all of it before
// returning.
type encoder struct {
	buf    []byte
	fields []field // a stack of the objects' sorted fields, reused
	limit  int     // the most buf may hold
}

// field is one name and value of an object being encoded.
type field struct {
	name  string
	value any
}

// errTooLarge stops an encoding that passed the encoder's limit.
var errTooLarge = errors.New("the encoding passed its limit")

// encode returns v encoded, in the encoder's buffer (valid until the next
// call), or errTooLarge as soon as the encoding passes limit bytes.
func (e *encoder) encode(v any, limit int) ([]byte, error) {
	e.buf, e.limit = e.buf[:0], limit
	err := e.value(v)
	return e.buf, err
}

// keepBuf is the largest buffer the encoder keeps between records.
const keepBuf = 64 << 10

// reset lets go of a buffer that one large result grew.
func (e *encoder) reset() {
	if cap(e.buf) > keepBuf {
		e.buf = nil
	}
	if cap(e.fields) > keepBuf {
		e.fields = nil
	}
}

// check reports errTooLarge once the buffer holds more than the limit. It
// runs after every scalar and every element, so the buffer passes the
// limit by at most one scalar (a string, at most as long as one gojq
// already holds in memory).
func (e *encoder) check() error {
	if len(e.buf) > e.limit {
		return errTooLarge
	}
	return nil
}

func (e *encoder) value(v any) error {
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case float64:
		e.float(v)
	case *big.Int:
		e.buf = v.Append(e.buf, 10)
	case json.Number:
		e.buf = append(e.buf, v...)
	case string:
		return e.string(v)
	case []any:
		return e.array(v)
	case map[string]any:
		return e.object(v)
	default:
		return fmt.Errorf("cannot encode a jq result of type %T", v)
	}
	return e.check()
}

// float follows encoding/json's choice between the two notations, as jq
// and gojq do.
func (e *encoder) float(f float64) {
	if math.IsNaN(f) {
		e.buf = append(e.buf, "null"...)
		return
	}
	f = min(max(f, -math.MaxFloat64), math.MaxFloat64)
	format := byte('f')
	if x := math.Abs(f); x != 0 && x < 1e-6 || x >= 1e21 {
		format = 'e'
	}
	start := len(e.buf)
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7
		b := e.buf[start:]
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			e.buf = e.buf[:len(e.buf)-1]
		}
	}
}

const hex = "0123456789abcdef"

// plain holds the bytes a string keeps as they are: printable ASCII but
// '"' and '\'.
var plain = func() (t [256]bool) {
	for b := ' '; b <= '~'; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// plainWord reports whether the 8 bytes of x are all plain: a word-wide
// test (a byte below ' ', equal to '"' or '\\', or above '~' sets its
// high bit), so that long plain runs are skipped 8 bytes at a time.
func plainWord(x uint64) bool {
	q, bs := x^(ones*'"'), x^(ones*'\\')
	y := (x - ones*' ') & ^x
	y |= (q - ones) & ^q
	y |= (bs - ones) & ^bs
	y |= (x + ones) | x
	return y&high == 0
}

// word is the 8 bytes of s (at least 8 long) from s[0], little-endian.
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// string writes s quoted: printable ASCII as it is but for '"' and '\',
// the usual short escapes, \u00XX for other control bytes, and \ufffd for
// each byte that is not UTF-8. A string that cannot fit the limit however
// it is escaped is refused before it is copied.
func (e *encoder) string(s string) error {
	if len(e.buf)+len(s)+2 > e.limit {
		return errTooLarge
	}
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plainWord(word(s[i:])) {
			i += 8
		}
		if i == len(s) {
			break
		}
		b := s[i]
		if plain[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			e.buf = append(e.buf, s[start:i]...)
			switch b {
			case '"', '\\':
				e.buf = append(e.buf, '\\', b)
			case '\b':
				e.buf = append(e.buf, '\\', 'b')
			case '\f':
				e.buf = append(e.buf, '\\', 'f')
			case '\n':
				e.buf = append(e.buf, '\\', 'n')
			case '\r':
				e.buf = append(e.buf, '\\', 'r')
			case '\t':
				e.buf = append(e.buf, '\\', 't')
			default:
				e.buf = append(e.buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			e.buf = append(e.buf, s[start:i]...)
			e.buf = append(e.buf, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
	return e.check()
}

func (e *encoder) array(vs []any) error {
	e.buf = append(e.buf, '[')
	for i, v := range vs {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.value(v); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return e.check()
}

func (e *encoder) object(m map[string]any) error {
	// The fields go on a stack shared by nested objects: this object's are
	// e.fields[base:], and nested ones push theirs above and pop them
	// before returning. One pass over the map takes names and values, so
	// no name is looked up again.
	base := len(e.fields)
	for k, v := range m {
		e.fields = append(e.fields, field{k, v})
	}
	fs := e.fields[base:]
	sortFields(fs)
	err := e.members(fs)
	// Let go of the names and values: in e.fields, since a nested object
	// may have moved the stack.
	clear(e.fields[base : base+len(fs)])
	e.fields = e.fields[:base]
	return err
}

// sortFields sorts fs by name: small objects, the common case, by
// insertion with the comparison inline.
func sortFields(fs []field) {
	if len(fs) > 16 {
		slices.SortFunc(fs, func(a, b field) int { return strings.Compare(a.name, b.name) })
		return
	}
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].name < fs[j-1].name; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

func (e *encoder) members(fs []field) error {
	e.buf = append(e.buf, '{')
	for i, f := range fs {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.string(f.name); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		if err := e.value(f.value); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return e.check()
}
