package record

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/streamproc/processor/record/keyjson"
)

// How a record key is written as JSON where an output names it (the
// "key" of the aggregate transform's values) and read back (eoscheck):
// package keyjson holds the rendering (a UTF-8 key as its JSON string,
// any other as {"base64":"..."}), apart from this package's Kafka client
// so that WebAssembly plugins name keys with the same code.
//
// Every key has exactly one rendering and ParseKeyJSON reads it back to
// the same bytes, so two keys never render alike. A null key has no
// rendering.

// KeyBase64 is the one member of the object that renders a key that is
// not valid UTF-8.
const KeyBase64 = keyjson.Base64

// AppendKeyJSON appends key's JSON rendering to dst (keyjson.Append).
func AppendKeyJSON(dst, key []byte) []byte { return keyjson.Append(dst, key) }

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
