package pgsink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/streamproc/processor/record/keyjson"
	"github.com/streamproc/processor/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordColumns are the columns of the default table that Commit writes
// (written_at takes its default).
var recordColumns = []string{"src_topic", "src_partition", "src_offset", "seq", "key", "value", "value_bytes", "headers", "ts"}

// emptyHeaders is the headers column of a record without headers;
// emptyHeadersValue the same as a column value, boxed once.
var (
	emptyHeaders          = []byte("[]")
	emptyHeadersValue any = emptyHeaders
)

// storableJSON tells whether v can go to a jsonb column as it is: valid
// JSON, valid UTF-8 (which encoding/json does not check), and within
// jsonb's own rules (jsonbAccepts). It is a cheap guess that PostgreSQL
// has the final word on: a value it refuses all the same goes again in
// value_bytes (copyRows).
func storableJSON(v []byte) bool {
	return validJSON(v) && utf8.Valid(v) && jsonbAccepts(v)
}

// Limits of PostgreSQL's numeric, which jsonb stores numbers as.
const (
	// numericMaxScale is the most digits after the decimal point
	// (NUMERIC_DSCALE_MAX).
	numericMaxScale = 16383
	// numericMaxPower is the highest power of ten of a number's first
	// significant digit (NUMERIC_WEIGHT_MAX, in base-10000 digits).
	numericMaxPower = 32767*4 + 3
	// numericMaxExponent bounds the exponent as numeric_in does (INT_MAX/2).
	numericMaxExponent = 1<<30 - 1
)

// jsonbAccepts tells whether jsonb, in a UTF8 database, takes v, which is
// valid JSON: that no string holds \u0000 (jsonb cannot store NUL) or a
// UTF-16 surrogate escape out of its pair (JavaScript writes half an emoji
// so), and that every number fits numeric.
func jsonbAccepts(v []byte) bool {
	for i := 0; i < len(v); {
		switch c := v[i]; {
		case c == '"':
			j, ok := jsonbString(v, i+1)
			if !ok {
				return false
			}
			i = j
		case c == '-' || (c >= '0' && c <= '9'):
			j, exp := i+1, false
			for ; j < len(v) && numberByte(v[j]); j++ {
				exp = exp || v[j] == 'e' || v[j] == 'E'
			}
			// Without an exponent, a number this short fits.
			if (exp || j-i > numericMaxScale) && !numericFits(v[i:j]) {
				return false
			}
			i = j
		default:
			i++
		}
	}
	return true
}

// jsonbString checks the escapes of the JSON string whose content starts
// at v[i] and returns the index after its closing quote.
func jsonbString(v []byte, i int) (int, bool) {
	for i < len(v) {
		for i < len(v) && v[i] != '"' && v[i] != '\\' {
			i++
		}
		if i == len(v) {
			return i, true
		}
		if v[i] == '"' {
			return i + 1, true
		}
		if i+1 >= len(v) || v[i+1] != 'u' {
			i += 2
			continue
		}
		r, ok := hex4(v, i+2)
		i += 6
		switch {
		case !ok, r == 0, r >= 0xDC00 && r <= 0xDFFF: // NUL; a low surrogate without its high one
			return 0, false
		case r >= 0xD800 && r <= 0xDBFF: // a high surrogate: its low one must follow
			if i+1 >= len(v) || v[i] != '\\' || v[i+1] != 'u' {
				return 0, false
			}
			lo, ok := hex4(v, i+2)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return 0, false
			}
			i += 6
		}
	}
	return i, true
}

// hex4 decodes the four hex digits at v[i:].
func hex4(v []byte, i int) (rune, bool) {
	if i+4 > len(v) {
		return 0, false
	}
	var r rune
	for _, c := range v[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func numberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// numericFits tells whether the JSON number n fits PostgreSQL's numeric
// as numeric_in reads it: at most numericMaxScale digits after the point
// (once the exponent is applied) and a first significant digit at most
// at 10^numericMaxPower.
func numericFits(n []byte) bool {
	if n[0] == '-' {
		n = n[1:]
	}
	mant, expText, hasExp := bytes.Cut(n, []byte{'e'})
	if !hasExp {
		mant, expText, hasExp = bytes.Cut(n, []byte{'E'})
	}
	intPart, frac, _ := bytes.Cut(mant, []byte{'.'})
	exp := 0
	if hasExp {
		neg := false
		if len(expText) > 0 && (expText[0] == '+' || expText[0] == '-') {
			neg = expText[0] == '-'
			expText = expText[1:]
		}
		for _, c := range expText {
			exp = exp*10 + int(c-'0')
			if exp >= numericMaxExponent {
				return false
			}
		}
		if neg {
			exp = -exp
		}
	}
	if max(0, len(frac)-exp) > numericMaxScale {
		return false
	}
	power := 0
	switch i := bytes.IndexFunc(intPart, func(r rune) bool { return r != '0' }); {
	case i >= 0:
		power = len(intPart) - 1 - i
	default:
		j := bytes.IndexFunc(frac, func(r rune) bool { return r != '0' })
		if j < 0 {
			return true // zero
		}
		power = -(j + 1)
	}
	return power+exp <= numericMaxPower
}

// validJSON is json.Valid, first asking maybeJSON: most binary and text
// values fail that cheap test and are spared json.Valid, which allocates
// its syntax error.
func validJSON(v []byte) bool { return maybeJSON(v) && json.Valid(v) }

// maybeJSON tells whether v starts like a JSON value; false means it is
// not JSON.
func maybeJSON(v []byte) bool {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[', '"', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return true
		}
		return false
	}
	return false
}

// rowSource is the pgx.CopyFromSource of Commit's rows in the default
// table. Its values point at fields it reuses for every row, of types that
// pgx encodes without allocating (the JSON columns excepted), and pgx
// encodes a row's values before it asks for the next row.
type rowSource struct {
	rows []sink.Row
	i    int
	vals []any // recordColumns' values, pointing at the fields below
	// asBytes, when not nil, tells per row whether its value goes to
	// value_bytes whatever storableJSON says (PostgreSQL refused it).
	asBytes []bool

	topic          pgtype.Text
	partition, seq pgtype.Int4
	offset         pgtype.Int8
	key, rawValue  bytesValue
	ts             pgtype.Timestamptz
	hbuf           []byte // the current row's headers, as JSON
}

// bytesValue is a bytea column's value; nil is NULL.
type bytesValue struct{ b []byte }

// BytesValue returns the bytes, for pgx.
func (v *bytesValue) BytesValue() ([]byte, error) { return v.b, nil }

func newRowSource(rows []sink.Row) *rowSource {
	s := &rowSource{rows: rows, i: -1}
	s.topic.Valid, s.partition.Valid, s.seq.Valid, s.offset.Valid = true, true, true, true
	s.vals = []any{&s.topic, &s.partition, &s.offset, &s.seq, &s.key, nil, &s.rawValue, nil, &s.ts}
	return s
}

// Next advances to the next row.
func (s *rowSource) Next() bool {
	s.i++
	return s.i < len(s.rows)
}

// Values returns the current row's columns, in recordColumns' order.
func (s *rowSource) Values() ([]any, error) {
	r := &s.rows[s.i]
	s.topic.String = r.Topic
	s.partition.Int32, s.offset.Int64, s.seq.Int32 = r.Partition, r.Offset, int32(r.Seq)
	s.key.b = r.Key
	switch {
	case r.Value == nil:
		s.vals[5], s.rawValue.b = nil, nil
	case (s.asBytes == nil || !s.asBytes[s.i]) && storableJSON(r.Value):
		s.vals[5], s.rawValue.b = r.Value, nil
	default:
		s.vals[5], s.rawValue.b = nil, r.Value
	}
	if len(r.Headers) == 0 {
		s.vals[7] = emptyHeadersValue
	} else {
		s.hbuf = appendHeaders(s.hbuf[:0], r.Headers)
		s.vals[7] = s.hbuf
	}
	s.ts = pgtype.Timestamptz{Time: r.Timestamp, Valid: !r.Timestamp.IsZero()}
	return s.vals, nil
}

// Err is always nil: Values cannot fail.
func (s *rowSource) Err() error { return nil }

// appendHeaders appends hs as a JSON array of {"key": k, "value": v}
// objects, the strings as encoding/json writes them. A key or value that is not valid UTF-8, or holds a NUL (which
// jsonb cannot store), is written base64-encoded as "key_base64" or
// "value_base64" instead; a nil value is null.
func appendHeaders(b []byte, hs []kgo.RecordHeader) []byte {
	b = append(b, '[')
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		if textualKey(h.Key) {
			b = append(b, `{"key":`...)
			b = keyjson.AppendString(b, h.Key)
		} else {
			b = append(b, `{"key_base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, []byte(h.Key))
			b = append(b, '"')
		}
		switch {
		case h.Value == nil:
			b = append(b, `,"value":null}`...)
		case textualValue(h.Value):
			b = append(b, `,"value":`...)
			b = keyjson.AppendString(b, h.Value)
			b = append(b, '}')
		default:
			b = append(b, `,"value_base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, h.Value)
			b = append(b, `"}`...)
		}
	}
	return append(b, ']')
}

// textualKey and textualValue tell whether a header key or value can be a
// jsonb string: valid UTF-8 without NUL.
func textualKey(s string) bool { return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) }

func textualValue(b []byte) bool { return bytes.IndexByte(b, 0) < 0 && utf8.Valid(b) }
