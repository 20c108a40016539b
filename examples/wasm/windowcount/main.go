// Command windowcount is an example WebAssembly transform that emits once
// per window, when the window closes: it counts the records of each
// record key in tumbling windows of one minute of record time and, once
// the partition's stream time passes a window's end plus a grace of ten
// seconds, emits the window's final count exactly once. Its outputs are
// byte for byte those of the aggregate transform with
// PROCESSOR_AGGREGATE_WINDOW=1m, PROCESSOR_AGGREGATE_GRACE=10s and
// PROCESSOR_AGGREGATE_EMIT=close: key <record key>@<window start in Unix
// milliseconds>, value {"key":<the key>,"value":<count>,
// "window_start":"...","window_end":"..."}, timestamp the window's last
// millisecond, and the lineage of the window's last input. A record of a
// window that has closed is late and dropped (aggregate can route it to
// PROCESSOR_LATE_TOPIC; a plugin cannot); a record without a key fails.
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/plugins/windowcount.wasm ./examples/wasm/windowcount
//
// and load it with its store declared, and declared to emit:
//
//	PROCESSOR_TRANSFORMS=wasm PROCESSOR_WASM_MODULE=bin/plugins/windowcount.wasm
//	PROCESSOR_WASM_STORES=windows PROCESSOR_WASM_EMIT_STORES=windows
//
// Each input puts its window's entry, keyed by the window's start (8
// bytes, big-endian) and the record key, holding the count and the
// offset of the last input counted, to expire at the window's end plus
// the grace; the processor deletes the entry then and writes what Closed
// makes of it in the same transaction, so that across aborts, crashes and
// rebalances every window that closed has exactly one output.
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/streamproc/processor/record/keyjson"
	"github.com/streamproc/processor/transform/wasm/guest"
)

func init() {
	guest.Handle(Count)
	guest.HandleClosed(Closed)
}

// The windows: tumbling, one minute of record time, ten seconds of grace.
const (
	window = int64(time.Minute / time.Millisecond)
	grace  = int64(10 * time.Second / time.Millisecond)
)

// windows is the store, declared as PROCESSOR_WASM_STORES=windows and
// PROCESSOR_WASM_EMIT_STORES=windows.
var windows = guest.Store("windows")

// Buffers reused by every call: the host has copied the outputs before
// the next call begins.
var (
	out   = make([]guest.Record, 1)
	skey  []byte
	prev  = make([]byte, 0, 40)
	entry []byte
	okey  []byte
	value []byte
)

// Count counts in into its key's window and emits nothing: the window
// emits once, when it closes (Closed).
func Count(in guest.Record) ([]guest.Record, error) {
	if in.Key == nil {
		return nil, errors.New("windowcount: the record has no key to count by")
	}
	ts := in.Timestamp
	stream, known := guest.StreamTime()
	if known && (ts > stream || ts < 0) {
		ts = stream // bounded as the stream time is
	}
	start := floorTo(ts, window)
	if known && start+window+grace <= stream {
		return nil, nil // late: its window has closed
	}
	skey = append(binary.BigEndian.AppendUint64(skey[:0], uint64(start)), in.Key...)
	v, ok, err := windows.AppendGet(prev[:0], skey)
	if err != nil {
		return nil, err
	}
	prev = v[:0]
	var n uint64
	if ok {
		if n, _, err = parseEntry(v); err != nil {
			return nil, err
		}
	}
	entry = strconv.AppendInt(append(strconv.AppendUint(entry[:0], n+1, 10), ' '), in.Source.Offset, 10)
	return nil, windows.Put(skey, entry, start+window+grace)
}

// Closed emits the final count of the window whose entry closed, with
// the lineage of its last input.
func Closed(c guest.Closing) ([]guest.Record, int64, error) {
	if len(c.Key) < 8 {
		return nil, -1, fmt.Errorf("windowcount: the store key %q names no window", c.Key)
	}
	start, key := int64(binary.BigEndian.Uint64(c.Key)), c.Key[8:]
	n, offset, err := parseEntry(c.Value)
	if err != nil {
		return nil, -1, err
	}
	end := start + window
	okey = strconv.AppendInt(append(append(okey[:0], key...), '@'), start, 10)
	value = append(keyjson.Append(append(value[:0], `{"key":`...), key), `,"value":`...)
	value = append(strconv.AppendUint(value, n, 10), `,"window_start":"`...)
	value = append(time.UnixMilli(start).UTC().AppendFormat(value, time.RFC3339Nano), `","window_end":"`...)
	value = append(time.UnixMilli(end).UTC().AppendFormat(value, time.RFC3339Nano), `"}`...)
	out[0] = guest.Record{Key: okey, Value: value, Timestamp: end - 1}
	return out, offset, nil
}

// parseEntry parses a window's entry: the count, a space, the offset of
// the last input counted.
func parseEntry(b []byte) (n uint64, offset int64, err error) {
	c, o, ok := bytes.Cut(b, []byte{' '})
	if ok {
		n, err = strconv.ParseUint(string(c), 10, 64)
	}
	if err == nil && ok {
		offset, err = strconv.ParseInt(string(o), 10, 64)
	}
	if !ok || err != nil || n == 0 {
		return 0, 0, fmt.Errorf("windowcount: the store holds %q, not a window's count and offset", b)
	}
	return n, offset, nil
}

// floorTo is the largest multiple of step at or below x.
func floorTo(x, step int64) int64 {
	q := x / step
	if x%step != 0 && x < 0 {
		q--
	}
	return q * step
}

// main is required by the Go toolchain but never runs in a reactor.
func main() {}
