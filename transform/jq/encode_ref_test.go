package jq

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf8"
)

// refEncoder writes jq results as JSON, byte for byte as gojq.Marshal does
// (NaN as null, infinities as ±math.MaxFloat64, \b and \f in strings, '<',
// '>' and '&' unescaped, object keys sorted), but into a buffer it reuses
// and with a limit: it stops as soon as the encoding passes it. A result
// may be small in memory and huge as JSON (an array holding one large
// object a thousand times is a thousand pointers to gojq, a thousand
// copies to JSON), and gojq.Marshal would build all of it before
// returning.
type refEncoder struct {
	buf   []byte
	keys  []string // a stack of the objects' sorted keys, reused
	limit int      // the most buf may hold
}

// errRefTooLarge stops an encoding that passed the refEncoder's limit.
var errRefTooLarge = errors.New("the encoding passed its limit")

// encode returns v encoded, in the refEncoder's buffer (valid until the next
// call), or errRefTooLarge as soon as the encoding passes limit bytes.
func (e *refEncoder) encode(v any, limit int) ([]byte, error) {
	e.buf, e.limit = e.buf[:0], limit
	err := e.value(v)
	return e.buf, err
}

// refKeepBuf is the largest buffer the refEncoder keeps between records.
const refKeepBuf = 64 << 10

// reset lets go of a buffer that one large result grew.
func (e *refEncoder) reset() {
	if cap(e.buf) > refKeepBuf {
		e.buf = nil
	}
	if cap(e.keys) > refKeepBuf {
		e.keys = nil
	}
}

// check reports errRefTooLarge once the buffer holds more than the limit. It
// runs after every scalar and every element, so the buffer passes the
// limit by at most one scalar (a string, at most as long as one gojq
// already holds in memory).
func (e *refEncoder) check() error {
	if len(e.buf) > e.limit {
		return errRefTooLarge
	}
	return nil
}

func (e *refEncoder) value(v any) error {
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
func (e *refEncoder) float(f float64) {
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

const refHex = "0123456789abcdef"

// string writes s quoted: printable ASCII as it is but for '"' and '\',
// the usual short escapes, \u00XX for other control bytes, and \ufffd for
// each byte that is not UTF-8. A string that cannot fit the limit however
// it is escaped is refused before it is copied.
func (e *refEncoder) string(s string) error {
	if len(e.buf)+len(s)+2 > e.limit {
		return errRefTooLarge
	}
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if ' ' <= b && b <= '~' && b != '"' && b != '\\' {
				i++
				continue
			}
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
				e.buf = append(e.buf, '\\', 'u', '0', '0', refHex[b>>4], refHex[b&0xF])
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

func (e *refEncoder) array(vs []any) error {
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

func (e *refEncoder) object(m map[string]any) error {
	// The keys go on a stack shared by nested objects: this object's are
	// e.keys[base:top], and nested ones push theirs above top and pop
	// them before returning.
	base := len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	top := len(e.keys)
	slices.Sort(e.keys[base:top])
	err := e.fields(m, base, top)
	clear(e.keys[base:top]) // let go of the key strings
	e.keys = e.keys[:base]
	return err
}

func (e *refEncoder) fields(m map[string]any, base, top int) error {
	e.buf = append(e.buf, '{')
	for i := base; i < top; i++ {
		if i > base {
			e.buf = append(e.buf, ',')
		}
		k := e.keys[i]
		if err := e.string(k); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		if err := e.value(m[k]); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return e.check()
}
