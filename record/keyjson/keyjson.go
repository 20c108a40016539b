// Package keyjson names a record key in JSON, as the processor's outputs
// name it (the "key" of the aggregate transform's values) and as
// record.ParseKeyJSON reads it back:
//
//   - a key that is valid UTF-8 is a JSON string of its text, as
//     encoding/json writes it: {"key":"order-7"};
//   - any other key (Java's LongSerializer and IntegerSerializer write
//     8 and 4 big-endian bytes, most of them not UTF-8) is an object with
//     one member, "base64", the key's bytes in standard base64 with
//     padding: {"key":{"base64":"AAAAAAAAAAc="}}.
//
// It imports only encoding/base64 and unicode/utf8, so that WebAssembly
// plugins (examples/wasm) name keys with the very code the processor
// uses, without bringing the Kafka client into the guest.
package keyjson

import (
	"encoding/base64"
	"unicode/utf8"
)

// Base64 is the one member of the object that names a key that is not
// valid UTF-8.
const Base64 = "base64"

// Append appends key's JSON name to dst: its JSON string if key is valid
// UTF-8, else {"base64":"..."}. Every key has exactly one name and two
// keys never share one.
func Append(dst, key []byte) []byte {
	if utf8.Valid(key) {
		return AppendString(dst, key)
	}
	dst = append(dst, `{"`+Base64+`":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, key)
	return append(dst, `"}`...)
}

const hex = "0123456789abcdef"

// AppendString appends s as the JSON string encoding/json writes for it:
// quotes and backslashes escaped, \b, \f, \n, \r and \t by name, other
// control characters, <, >, &, U+2028 and U+2029 as \u escapes, and each
// byte of s that is not part of valid UTF-8 as \ufffd (TestAppendString
// holds it to encoding/json).
func AppendString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			// At most utf8.UTFMax bytes: the conversion of a []byte
			// needs no allocation.
			r, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(append(dst, s[start:i]...), `\ufffd`...)
				start = i + size
			case r == '\u2028' || r == '\u2029':
				dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
				start = i + size
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}
