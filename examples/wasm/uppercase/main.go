// Command uppercase is an example WebAssembly transform for the
// processor's wasm transform: it upper-cases every record's value and
// keeps its key and headers. Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o bin/plugins/uppercase.wasm ./examples/wasm/uppercase
//
// and load it with PROCESSOR_TRANSFORMS=wasm
// PROCESSOR_WASM_MODULE=bin/plugins/uppercase.wasm.
//
// It is written for speed, as a guide to what costs in a guest: ASCII is
// changed in place in the input buffer (no allocation, no copy), 32 bytes
// per loop iteration, because under the host's deadline every loop
// iteration and most branches of Go code compiled to WebAssembly cost
// about 25 ns. Other UTF-8 goes through bytes.ToUpper.
package main

import (
	"bytes"
	"encoding/binary"

	"github.com/streamproc/processor/transform/wasm/guest"
)

func init() { guest.Handle(Uppercase) }

// out is returned by every call: the host has read the outputs before the
// next call begins, so one reused slice is enough.
var out = make([]guest.Record, 1)

// Uppercase upper-cases in.Value.
func Uppercase(in guest.Record) ([]guest.Record, error) {
	if !upperASCII(in.Value) {
		in.Value = bytes.ToUpper(in.Value)
	}
	out[0] = in
	return out, nil
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// upperASCII upper-cases the ASCII letters of v in place, eight bytes at
// a time, and reports whether all of v is ASCII. When it is not, part of
// v may already be upper-cased: bytes.ToUpper of that is still the right
// answer, since upper-casing twice changes nothing.
func upperASCII(v []byte) bool {
	le := binary.LittleEndian
	i := 0
	for ; i+32 <= len(v); i += 32 {
		w0, w1, w2, w3 := le.Uint64(v[i:]), le.Uint64(v[i+8:]), le.Uint64(v[i+16:]), le.Uint64(v[i+24:])
		if (w0|w1|w2|w3)&highs != 0 {
			return false
		}
		le.PutUint64(v[i:], upper8(w0))
		le.PutUint64(v[i+8:], upper8(w1))
		le.PutUint64(v[i+16:], upper8(w2))
		le.PutUint64(v[i+24:], upper8(w3))
	}
	for ; i < len(v); i++ {
		c := v[i]
		if c >= 0x80 {
			return false
		}
		if 'a' <= c && c <= 'z' {
			v[i] = c - ('a' - 'A')
		}
	}
	return true
}

// upper8 upper-cases the eight ASCII bytes packed in w: a byte's high bit
// in a+z marks 'a' <= b <= 'z', and clearing 0x20 upper-cases it.
func upper8(w uint64) uint64 {
	a := w + (0x80-'a')*ones   // high bit set iff b >= 'a'
	z := w + (0x80-'z'-1)*ones // high bit set iff b > 'z'
	lower := a &^ z & highs    // 'a' <= b <= 'z'
	return w &^ (lower >> 2)   // 0x80 >> 2 is 0x20
}

// main is required by the Go toolchain but never runs in a reactor.
func main() {}
