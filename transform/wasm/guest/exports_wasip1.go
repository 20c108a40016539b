//go:build wasip1

package guest

import (
	"fmt"
	"unsafe"
)

// The ABI's memory layouts (ABI.md). WebAssembly is little-endian and
// these structs have no padding, so they are the wire format itself: the
// guest reads the host's input and writes its output without a parse or
// an encode step, and outputs point at bytes where they already are.

// inputHead is the fixed start of an input buffer. Offsets are relative
// to the buffer's start; a length of -1 is null.
type inputHead struct {
	topicOff, topicLen uint32
	keyOff             uint32
	keyLen             int32
	valueOff           uint32
	valueLen           int32
	headersOff         uint32 // a table of headerCount inHeader
	headerCount        uint32
	partition          int32
	_                  uint32
	offset             int64
	timestamp          int64
}

// inHeader is one input header: offsets into the input buffer.
type inHeader struct {
	keyOff, keyLen uint32
	valueOff       uint32
	valueLen       int32
}

// outRecord is one output record: absolute addresses in guest memory.
type outRecord struct {
	topicPtr    uint32
	topicLen    int32 // 0: the processor's default output topic
	keyPtr      uint32
	keyLen      int32
	valuePtr    uint32
	valueLen    int32
	headersPtr  uint32 // a table of headerCount outHeader
	headerCount uint32
}

// outHeader is one output header: absolute addresses in guest memory.
type outHeader struct {
	keyPtr, keyLen uint32
	valuePtr       uint32
	valueLen       int32
}

// result is what processor_process returns the address of.
type result struct {
	status uint32 // 0 records, 1 error
	count  uint32 // records, or the error message's length
	ptr    uint32 // the outRecord table, or the error message
	stamps uint32 // processor_closed: the outputs' timestamps (an int64 each); 0 otherwise
}

const (
	statusOK      = 0
	statusError   = 1
	inputHeadSize = uint32(unsafe.Sizeof(inputHead{}))
)

// Module state, reused across calls so a call allocates nothing of its
// own. kept holds the last outputs (and errMsg the last error) so the
// memory the host reads stays alive until the next call.
var (
	inBuf   []byte
	headers []Header
	outRecs []outRecord
	outHdrs []outHeader
	kept    []Record
	errMsg  string
	res     result
)

// abiVersion reports the ABI version this module implements.
//
//go:wasmexport processor_abi_version
func abiVersion() int32 { return ABIVersion }

// alloc returns the address of an input buffer of at least size bytes,
// which the host writes the next inputs into.
//
//go:wasmexport processor_alloc
func alloc(size uint32) uint32 {
	if uint32(len(inBuf)) < size {
		inBuf = make([]byte, size)
	}
	if len(inBuf) == 0 {
		return 0
	}
	return addr(inBuf)
}

// process runs the registered function on the input of size bytes at ptr
// and returns the address of a result.
//
//go:wasmexport processor_process
func process(ptr, size uint32) uint32 {
	kept, errMsg = nil, ""
	if err := run(ptr, size); err != nil {
		errMsg = err.Error()
		res = result{status: statusError, count: uint32(len(errMsg)), ptr: strAddr(errMsg)}
	}
	return uint32(uintptr(unsafe.Pointer(&res)))
}

// run decodes the input, calls the handler and lays out its outputs. A
// panic anywhere in it (the handler's included) becomes its error.
func run(ptr, size uint32) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	if handler == nil {
		return errNoHandler
	}
	if len(inBuf) == 0 || ptr != addr(inBuf) || size > uint32(len(inBuf)) || size < inputHeadSize {
		return errBadInput
	}
	b := inBuf[:size]
	h := (*inputHead)(unsafe.Pointer(&b[0]))
	var in Record
	in.Source.Topic = str(b, h.topicOff, h.topicLen)
	in.Source.Partition = h.partition
	in.Source.Offset = h.offset
	in.Timestamp = h.timestamp
	in.Key = nbytes(b, h.keyOff, h.keyLen)
	in.Value = nbytes(b, h.valueOff, h.valueLen)
	if n := h.headerCount; n > 0 {
		table := unsafe.Slice((*inHeader)(unsafe.Pointer(&b[h.headersOff : h.headersOff+n*16][0])), n)
		headers = headers[:0]
		for i := range table {
			ih := &table[i]
			headers = append(headers, Header{Key: str(b, ih.keyOff, ih.keyLen), Value: nbytes(b, ih.valueOff, ih.valueLen)})
		}
		in.Headers = headers[:n:n]
	}

	outs, err := handler(in)
	if err != nil {
		return err
	}
	layout(outs)
	return nil
}

// layout lays out outs in the ABI's output table and sets res to point
// at it; kept keeps outs, and with them the bytes the table points at,
// until the next call.
func layout(outs []Record) {
	kept = outs
	outRecs, outHdrs = outRecs[:0], outHdrs[:0]
	for i := range outs {
		o := &outs[i]
		r := outRecord{
			topicPtr: strAddr(o.Topic), topicLen: int32(len(o.Topic)),
			headerCount: uint32(len(o.Headers)), headersPtr: uint32(len(outHdrs)), // an index until outHdrs stops growing
		}
		r.keyPtr, r.keyLen = nbytesAddr(o.Key)
		r.valuePtr, r.valueLen = nbytesAddr(o.Value)
		for j := range o.Headers {
			oh := &o.Headers[j]
			vp, vl := nbytesAddr(oh.Value)
			outHdrs = append(outHdrs, outHeader{keyPtr: strAddr(oh.Key), keyLen: uint32(len(oh.Key)), valuePtr: vp, valueLen: vl})
		}
		outRecs = append(outRecs, r)
	}
	if len(outHdrs) > 0 {
		base := uint32(uintptr(unsafe.Pointer(&outHdrs[0])))
		for i := range outRecs {
			outRecs[i].headersPtr = base + outRecs[i].headersPtr*uint32(unsafe.Sizeof(outHeader{}))
		}
	}
	res = result{status: statusOK, count: uint32(len(outRecs))}
	if len(outRecs) > 0 {
		res.ptr = uint32(uintptr(unsafe.Pointer(&outRecs[0])))
	}
}

type guestError string

func (e guestError) Error() string { return string(e) }

const (
	errNoHandler = guestError("no transform registered: call guest.Handle from init")
	errBadInput  = guestError("the input is not where processor_alloc put the buffer")
)

// str views b[off:off+n] as a string, without copying.
func str(b []byte, off, n uint32) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&b[off : off+n][0], n)
}

// nbytes returns b[off:off+n], or nil for length -1.
func nbytes(b []byte, off uint32, n int32) []byte {
	if n < 0 {
		return nil
	}
	return b[off : off+uint32(n) : off+uint32(n)]
}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func strAddr(s string) uint32 {
	if s == "" {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s))))
}

// nbytesAddr returns v's address and length, -1 for nil (null).
func nbytesAddr(v []byte) (uint32, int32) {
	if v == nil {
		return 0, -1
	}
	if len(v) == 0 {
		return 0, 0
	}
	return addr(v), int32(len(v))
}
