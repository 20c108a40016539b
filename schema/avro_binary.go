package schema

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"
)

// avroReader reads Avro's binary primitives from one payload. The first
// error sticks: later reads return zero values, and err says what went
// wrong first.
type avroReader struct {
	buf []byte
	pos int
	err error
	// empty counts the array items read so far that took no bytes
	// (nulls, records without fields), bounded by maxEmptyItems.
	empty int
}

// errAvroShort is a payload that ends inside a value.
var errAvroShort = errors.New("unexpected end of the payload")

// fail records msg as the reader's error unless there is one already.
func (r *avroReader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New("avro: " + msg)
	}
}

// readVarint reads a zigzag varint of at most bits bits (32 or 64): a
// varint longer than that, or whose last byte carries bits beyond it, is
// an overflow (an error, as twmb/avro has it, rather than a value cut
// short).
func (r *avroReader) readVarint(bits uint, what string) uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	for s := uint(0); s < bits; s += 7 {
		if r.pos >= len(r.buf) {
			r.err = errAvroShort
			return 0
		}
		b := r.buf[r.pos]
		r.pos++
		if bits-s < 7 && b>>(bits-s) != 0 {
			break // bits beyond the type's, or a continuation
		}
		v |= uint64(b&0x7f) << s
		if b&0x80 == 0 {
			return (v >> 1) ^ -(v & 1)
		}
	}
	r.fail(what + " overflow")
	return 0
}

// readInt reads an int (at most 5 bytes).
func (r *avroReader) readInt() int32 { return int32(uint32(r.readVarint(32, "int"))) }

// readLong reads a long (at most 10 bytes).
func (r *avroReader) readLong() int64 { return int64(r.readVarint(64, "long")) }

// readBool reads a boolean: one byte, 0 or 1.
func (r *avroReader) readBool() bool {
	b := r.readFixed(1)
	if len(b) == 0 {
		return false
	}
	if b[0] > 1 {
		r.fail("invalid bool")
	}
	return b[0] == 1
}

// readFloat reads a float (4 bytes, little-endian IEEE 754).
func (r *avroReader) readFloat() float32 {
	b := r.readFixed(4)
	if len(b) < 4 {
		return 0
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// readDouble reads a double (8 bytes, little-endian IEEE 754).
func (r *avroReader) readDouble() float64 {
	b := r.readFixed(8)
	if len(b) < 8 {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// readFixed returns the next n bytes of the payload (not a copy).
func (r *avroReader) readFixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.buf)-r.pos {
		r.pos = len(r.buf)
		r.err = errAvroShort
		return nil
	}
	b := r.buf[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return b
}

// readBytes reads length-prefixed bytes (not a copy).
func (r *avroReader) readBytes(what string) []byte {
	n := r.readLong()
	if r.err != nil {
		return nil
	}
	if n < 0 {
		r.fail("invalid " + what + " length")
		return nil
	}
	if n > int64(len(r.buf)-r.pos) {
		r.pos = len(r.buf)
		r.err = errAvroShort
		return nil
	}
	return r.readFixed(int(n))
}

// readString reads a string; it shares the payload's memory, and lives
// only as long as the call that decodes the payload.
func (r *avroReader) readString() string {
	b := r.readBytes("string")
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// readBlockHeader reads an array or map block's count of items; a
// negative count is followed by the block's size in bytes, which is read
// and not needed.
func (r *avroReader) readBlockHeader() int64 {
	n := r.readLong()
	if n < 0 {
		r.readLong()
		return -n
	}
	return n
}

// appendVarint appends n as a zigzag varint.
func appendVarint(dst []byte, n int64) []byte {
	u := uint64(n<<1) ^ uint64(n>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// appendAvroBool appends a boolean byte.
func appendAvroBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// appendAvroFloat appends a float, little-endian.
func appendAvroFloat(dst []byte, f float32) []byte {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
}

// appendAvroDouble appends a double, little-endian.
func appendAvroDouble(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

// appendAvroBytes appends length-prefixed bytes.
func appendAvroBytes(dst, b []byte) []byte {
	return append(appendVarint(dst, int64(len(b))), b...)
}

// appendAvroString appends a length-prefixed string.
func appendAvroString(dst []byte, s string) []byte {
	return append(appendVarint(dst, int64(len(s))), s...)
}
