// Command count is an example WebAssembly transform that keeps state: it
// counts the records of each record key in a state store, exactly once,
// and emits the updated count for every input, as the aggregate
// transform's FUNCTION=count does: key the record key, value
// {"key":<the key>,"value":<count>}, headers kept, the key named as
// aggregate names it (a UTF-8 key as its JSON string, any other as
// {"base64":"..."}). A record without a key fails. Build it as a WASI
// reactor:
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
// gap. The store holds, per key, the count in decimal under the key's
// bytes behind a 0x00 byte, as aggregate's does, so that keys that are
// not UTF-8 (Java's LongSerializer keys) count apart. A count stored by an
// earlier build under the key's JSON string is read and moved where that
// string named the key alone (valid UTF-8 without U+FFFD), as aggregate
// does (docs/state.md, "Keys are bytes").
//
// A call makes two host calls (a Get and a Put; four when it moves an old
// entry) and allocates nothing: every buffer is reused from call to call.
package main

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/streamproc/processor/record/keyjson"
	"github.com/streamproc/processor/transform/wasm/guest"
)

func init() { guest.Handle(Count) }

// counts is the store, declared as PROCESSOR_WASM_STORES=counts.
var counts = guest.Store("counts")

// Buffers reused by every call: the host has copied the outputs before
// the next call begins.
var (
	out   = make([]guest.Record, 1)
	skey  []byte // the store's key: 0x00 and the record key
	js    []byte // the key's JSON string: the old store key, and its name in the output
	named []byte // the key as the output names it
	prev  = make([]byte, 0, 20)
	num   []byte
	value []byte
)

// Count adds in to its key's count and emits the new count.
func Count(in guest.Record) ([]guest.Record, error) {
	if in.Key == nil {
		return nil, errors.New("count: the record has no key to count by")
	}
	skey = append(append(skey[:0], 0), in.Key...)
	v, ok, err := counts.AppendGet(prev[:0], skey)
	if err != nil {
		return nil, err
	}
	old := false
	if valid := utf8.Valid(in.Key); valid {
		js = keyjson.AppendString(js[:0], in.Key)
		if !ok && !bytes.ContainsRune(in.Key, utf8.RuneError) {
			if v, ok, err = counts.AppendGet(prev[:0], js); err != nil {
				return nil, err
			}
			old = ok
		}
		named = append(named[:0], js...)
	} else {
		named = keyjson.Append(named[:0], in.Key)
	}
	prev = v[:0]
	var n uint64
	if ok {
		if n, ok = parseCount(v); !ok {
			return nil, errors.New("count: the store holds a value that is not a count")
		}
	}
	num = strconv.AppendUint(num[:0], n+1, 10)
	if err := counts.Put(skey, num, 0); err != nil {
		return nil, err
	}
	if old {
		if err := counts.Delete(js); err != nil {
			return nil, err
		}
	}
	value = append(append(append(append(append(value[:0], `{"key":`...), named...), `,"value":`...), num...), '}')
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

// main is required by the Go toolchain but never runs in a reactor.
func main() {}
