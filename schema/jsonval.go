package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The JSON values the Avro encoder reads: nil, bool, string, jsonNumber,
// *jsonObject and []any. Objects keep their keys' order (an Avro map is
// written in the order the JSON lists its keys, so that decoding and
// encoding give the same bytes) and numbers keep their literal text (so
// that a long is never rounded through float64).

// jsonNumber is a JSON number's literal text.
type jsonNumber string

// jsonObject is a JSON object with its keys in order.
type jsonObject struct {
	keys []string
	vals []any
}

// get returns the value of key and whether it is there.
func (o *jsonObject) get(key string) (any, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

// maxJSONDepth bounds the nesting of a JSON value.
const maxJSONDepth = 1000

// jsonParser parses JSON values, reusing its token decoders (which are
// costly to make); it is safe for concurrent use.
type jsonParser struct {
	decoders sync.Pool
}

// parse parses one JSON value (and nothing after it).
func (p *jsonParser) parse(js []byte) (any, error) {
	d, _ := p.decoders.Get().(*jsontext.Decoder)
	if d == nil {
		d = jsontext.NewDecoder(bytes.NewBuffer(nil))
	}
	defer p.decoders.Put(d)
	d.Reset(bytes.NewBuffer(js))
	v, err := readJSON(d, 0)
	if err != nil {
		return nil, fmt.Errorf("the value is not valid JSON: %v", err)
	}
	if _, err := d.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("the value is not valid JSON: more than one value")
	}
	return v, nil
}

// readJSON reads the next value from d.
func readJSON(d *jsontext.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	tok, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return jsonNumber(tok.String()), nil
	case '[':
		arr := []any{}
		for d.PeekKind() != ']' {
			v, err := readJSON(d, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := d.ReadToken()
		return arr, err
	case '{':
		o := &jsonObject{}
		for d.PeekKind() != '}' {
			k, err := d.ReadToken()
			if err != nil {
				return nil, err
			}
			key := k.String()
			v, err := readJSON(d, depth+1)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, key)
			o.vals = append(o.vals, v)
		}
		_, err := d.ReadToken()
		return o, err
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// describe renders a JSON value briefly for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		if v {
			return "true"
		}
		return "false"
	case jsonNumber:
		return string(v)
	case string:
		q, _ := jsontext.AppendQuote(nil, clip(v))
		return string(q)
	case *jsonObject:
		return "an object"
	case []any:
		return "an array"
	}
	return "a value"
}

// clip shortens s for messages.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
