//go:build wasip1

package guest

import (
	"fmt"
	"unsafe"
)

// closingHead is the fixed start of a closing input (ABI.md, "Emitting
// when an entry closes"): offsets relative to the buffer's start.
type closingHead struct {
	storeOff, storeLen uint32
	keyOff, keyLen     uint32
	valueOff, valueLen uint32
	topicOff, topicLen uint32
	partition          int32
	store              int32 // the store's index in STORES
	expiry             int64
	streamTime         int64
}

// closedResult is what processor_closed returns the address of: a
// result whose stamps word points at the outputs' timestamps, and the
// lineage offset.
type closedResult struct {
	result
	lineage int64
}

var (
	closedRes closedResult
	stamps    []int64
)

const closingHeadSize = uint32(unsafe.Sizeof(closingHead{}))

// closed runs the registered ClosedFunc on the closing input of size
// bytes at ptr and returns the address of a closed result.
//
//go:wasmexport processor_closed
func closed(ptr, size uint32) uint32 {
	kept, errMsg = nil, ""
	if err := runClosed(ptr, size); err != nil {
		errMsg = err.Error()
		closedRes = closedResult{result: result{status: statusError, count: uint32(len(errMsg)), ptr: strAddr(errMsg)}, lineage: -1}
	}
	return uint32(uintptr(unsafe.Pointer(&closedRes)))
}

// runClosed decodes the closing input, calls the ClosedFunc and lays out
// its outputs and their timestamps. A panic becomes its error.
func runClosed(ptr, size uint32) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	if closedHandler == nil {
		return errNoClosed
	}
	if len(inBuf) == 0 || ptr != addr(inBuf) || size > uint32(len(inBuf)) || size < closingHeadSize {
		return errBadInput
	}
	b := inBuf[:size]
	h := (*closingHead)(unsafe.Pointer(&b[0]))
	c := Closing{
		Store:      str(b, h.storeOff, h.storeLen),
		Key:        nbytes(b, h.keyOff, int32(h.keyLen)),
		Value:      nbytes(b, h.valueOff, int32(h.valueLen)),
		Expiry:     h.expiry,
		StreamTime: h.streamTime,
		Source:     Source{Topic: str(b, h.topicOff, h.topicLen), Partition: h.partition, Offset: -1},
	}
	outs, lineage, err := closedHandler(c)
	if err != nil {
		return err
	}
	stamps = stamps[:0]
	for i := range outs {
		ts := outs[i].Timestamp
		if ts < 0 {
			return fmt.Errorf("guest: output record %d of a closed entry has the negative timestamp %d", i, ts)
		}
		if ts == 0 {
			ts = c.Expiry
		}
		stamps = append(stamps, ts)
	}
	layout(outs)
	closedRes = closedResult{result: res, lineage: max(lineage, -1)}
	if len(stamps) > 0 {
		closedRes.stamps = uint32(uintptr(unsafe.Pointer(&stamps[0])))
	}
	return nil
}

const errNoClosed = guestError("no closed-entry function registered: call guest.HandleClosed from init (the wasm transform's EMIT_STORES setting names stores that emit)")
