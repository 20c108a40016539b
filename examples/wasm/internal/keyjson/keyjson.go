// Package keyjson names a record key in JSON as the processor's
// aggregate transform names it (record.AppendKeyJSON), for the example
// WebAssembly plugins, which do not import the processor's own packages
// (they would bring the Kafka client into the guest).
package keyjson

import (
	"encoding/base64"
	"unicode/utf8"
)

// Append appends key as aggregate names it: a UTF-8 key as its JSON
// string, any other as {"base64":"..."}.
func Append(b, key []byte) []byte {
	if utf8.Valid(key) {
		return AppendString(b, key)
	}
	return append(base64.StdEncoding.AppendEncode(append(b, `{"base64":"`...), key), `"}`...)
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it (so the output names a key as aggregate does, and the old
// store keys are found): quotes, backslashes, control characters (\b and
// \f by name, as encoding/json does since Go 1.22; an earlier build of
// this example wrote them \u0008 and \u000c, so a key holding one starts
// its count again), <, > and &, U+2028 and U+2029; invalid UTF-8 as
// U+FFFD.
func AppendString(b, s []byte) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			switch r {
			case utf8.RuneError:
				b = append(b, `\ufffd`...)
			default:
				b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}
