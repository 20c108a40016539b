package record

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// How a record key is written as JSON where an output names it (the
// "key" of the aggregate transform's values) and read back (eoscheck):
//
//   - a key that is valid UTF-8 is a JSON string of its text, as
//     encoding/json writes it: {"key":"order-7"};
//   - any other key (Java's LongSerializer and IntegerSerializer write
//     8 and 4 big-endian bytes, most of them not UTF-8) is an object with
//     one member, "base64", the key's bytes in standard base64 with
//     padding: {"key":{"base64":"AAAAAAAAAAc="}}.
//
// Every key has exactly one rendering and ParseKey reads it back to the
// same bytes, so two keys never render alike. A null key has no
// rendering.

// KeyBase64 is the one member of the object that renders a key that is
// not valid UTF-8.
const KeyBase64 = "base64"

// AppendKeyJSON appends key's JSON rendering to dst.
func AppendKeyJSON(dst, key []byte) []byte {
	if utf8.Valid(key) {
		return appendJSONString(dst, key)
	}
	dst = append(dst, `{"`+KeyBase64+`":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, key)
	return append(dst, `"}`...)
}

const hex = "0123456789abcdef"

// appendJSONString appends s, valid UTF-8, as the JSON string
// encoding/json writes for it: quotes and backslashes escaped, \b, \f,
// \n, \r and \t by name, other control characters, <, >, &, U+2028
// and U+2029 as \u escapes (TestKeyJSONRoundTrip holds it to
// encoding/json).
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s[i:])
			if r == '\u2028' || r == '\u2029' {
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

// ParseKeyJSON returns the key whose rendering (AppendKeyJSON) js is. It
// accepts only that rendering, byte for byte: null, a number, an object
// with other members, escapes encoding/json would not write, and the
// base64 form of a key that is valid UTF-8 (which renders as a string)
// are all refused, so that a key and its rendering are one to one.
func ParseKeyJSON(js []byte) ([]byte, error) {
	key, err := parseKeyJSON(js)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(AppendKeyJSON(nil, key), js) {
		return nil, fmt.Errorf("%.60s is not the rendering of the key it names (%.60s)", js, AppendKeyJSON(nil, key))
	}
	return key, nil
}

func parseKeyJSON(js []byte) ([]byte, error) {
	switch {
	case len(js) == 0:
		return nil, errors.New("no key")
	case js[0] == '"':
		var s string
		if err := json.Unmarshal(js, &s); err != nil {
			return nil, fmt.Errorf("a key string: %w", err)
		}
		return []byte(s), nil
	case js[0] == '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("a key object: %w", err)
		}
		var enc string
		if err := json.Unmarshal(m[KeyBase64], &enc); len(m) != 1 || m[KeyBase64] == nil || err != nil {
			return nil, fmt.Errorf("a key object must have the one string member %q", KeyBase64)
		}
		key, err := base64.StdEncoding.Strict().DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("a key's %s: %w", KeyBase64, err)
		}
		return key, nil
	case string(js) == "null":
		return nil, errors.New("null, not a key")
	}
	return nil, fmt.Errorf("%.40s is neither a key string nor a {%q: ...} object", js, KeyBase64)
}
