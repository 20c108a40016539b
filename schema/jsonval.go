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
// costly to make) and scratch space; it is safe for concurrent use.
type jsonParser struct {
	states sync.Pool // of *parseState
	// names interns object keys that are names of the schema (record
	// fields), so that the usual keys cost no allocation. Read-only.
	names map[string]string
}

// parseState is one parse's decoder and the stacks that collect the
// members of open objects and arrays before they are copied out at
// their exact size.
type parseState struct {
	d    *jsontext.Decoder
	vals []any
	keys []string
}

// parse parses one JSON value (and nothing after it).
func (p *jsonParser) parse(js []byte) (any, error) {
	st, _ := p.states.Get().(*parseState)
	if st == nil {
		st = &parseState{d: jsontext.NewDecoder(bytes.NewBuffer(nil))}
	}
	defer p.states.Put(st)
	st.d.Reset(bytes.NewBuffer(js))
	st.vals, st.keys = st.vals[:0], st.keys[:0]
	v, err := p.read(st, 0)
	clear(st.vals[:cap(st.vals)])
	if err != nil {
		return nil, fmt.Errorf("the value is not valid JSON: %v", err)
	}
	if _, err := st.d.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("the value is not valid JSON: more than one value")
	}
	return v, nil
}

// read reads the next value.
func (p *jsonParser) read(st *parseState, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	d := st.d
	switch d.PeekKind() {
	case '0':
		raw, err := d.ReadValue()
		return jsonNumber(raw), err
	case '[':
		return p.readArray(st, depth)
	case '{':
		return p.readObject(st, depth)
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
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// readArray reads an array's items onto st.vals, then copies them out.
func (p *jsonParser) readArray(st *parseState, depth int) (any, error) {
	if _, err := st.d.ReadToken(); err != nil {
		return nil, err
	}
	base := len(st.vals)
	for st.d.PeekKind() != ']' {
		v, err := p.read(st, depth+1)
		if err != nil {
			return nil, err
		}
		st.vals = append(st.vals, v)
	}
	arr := append(make([]any, 0, len(st.vals)-base), st.vals[base:]...)
	st.vals = st.vals[:base]
	_, err := st.d.ReadToken()
	return arr, err
}

// readObject reads an object's members onto st.keys and st.vals, then
// copies them out in order.
func (p *jsonParser) readObject(st *parseState, depth int) (any, error) {
	if _, err := st.d.ReadToken(); err != nil {
		return nil, err
	}
	vbase, kbase := len(st.vals), len(st.keys)
	for st.d.PeekKind() != '}' {
		raw, err := st.d.ReadValue()
		if err != nil {
			return nil, err
		}
		key, ok := "", false
		if bytes.IndexByte(raw, '\\') < 0 {
			key, ok = p.names[string(raw[1:len(raw)-1])]
			if !ok {
				key = string(raw[1 : len(raw)-1])
			}
		} else {
			b, err := jsontext.AppendUnquote(nil, raw)
			if err != nil {
				return nil, err
			}
			key = string(b)
		}
		v, err := p.read(st, depth+1)
		if err != nil {
			return nil, err
		}
		st.keys = append(st.keys, key)
		st.vals = append(st.vals, v)
	}
	o := &jsonObject{
		keys: append(make([]string, 0, len(st.keys)-kbase), st.keys[kbase:]...),
		vals: append(make([]any, 0, len(st.vals)-vbase), st.vals[vbase:]...),
	}
	st.keys, st.vals = st.keys[:kbase], st.vals[:vbase]
	_, err := st.d.ReadToken()
	return o, err
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
