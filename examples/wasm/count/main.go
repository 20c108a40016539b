// Command count is an example WebAssembly transform that keeps state: it
// counts the records of each record key in a state store, exactly once,
// and emits the updated count for every input, as the aggregate
// transform's FUNCTION=count does: key the record key, value
// {"key":<the key as a JSON string>,"value":<count>}, headers kept. A
// record without a key fails. Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/plugins/count.wasm ./examples/wasm/count
//
// and load it with its store declared:
//
//	PROCESSOR_TRANSFORMS=wasm PROCESSOR_WASM_MODULE=bin/plugins/count.wasm PROCESSOR_WASM_STORES=counts
//
// The store's changelog is <group>-counts-changelog; like aggregate's it
// needs PROCESSOR_GUARANTEE=exactly_once and one input topic
// (docs/state.md). Through aborts, crashes and rebalances every key's
// counts run 1, 2, 3, ... in the committed output, with no repeat and no
// gap. The store holds, per key, the count in decimal under the key's JSON
// form, as aggregate's does.
//
// A call makes two host calls (a Get and a Put) and allocates nothing:
// every buffer is reused from call to call.
package main

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/streamproc/processor/transform/wasm/guest"
)

func init() { guest.Handle(Count) }

// counts is the store, declared as PROCESSOR_WASM_STORES=counts.
var counts = guest.Store("counts")

// Buffers reused by every call: the host has copied the outputs before
// the next call begins.
var (
	out   = make([]guest.Record, 1)
	js    []byte // the key's JSON form, the store's key
	prev  = make([]byte, 0, 20)
	num   []byte
	value []byte
)

// Count adds in to its key's count and emits the new count.
func Count(in guest.Record) ([]guest.Record, error) {
	if in.Key == nil {
		return nil, errors.New("count: the record has no key to count by")
	}
	js = appendJSONString(js[:0], in.Key)
	v, ok, err := counts.AppendGet(prev[:0], js)
	if err != nil {
		return nil, err
	}
	prev = v[:0]
	var n uint64
	if ok {
		if n, ok = parseCount(v); !ok {
			return nil, errors.New("count: the store holds a value that is not a count")
		}
	}
	num = strconv.AppendUint(num[:0], n+1, 10)
	if err := counts.Put(js, num, 0); err != nil {
		return nil, err
	}
	value = append(append(append(append(append(value[:0], `{"key":`...), js...), `,"value":`...), num...), '}')
	out[0] = guest.Record{Key: in.Key, Value: value, Headers: in.Headers}
	return out, nil
}

// parseCount parses a decimal count.
func parseCount(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

const hex = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it (so the store's keys are aggregate's): quotes, backslashes,
// control characters, <, > and &, U+2028 and U+2029; invalid UTF-8 as
// U+FFFD.
func appendJSONString(b, s []byte) []byte {
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

// main is required by the Go toolchain but never runs in a reactor.
func main() {}
