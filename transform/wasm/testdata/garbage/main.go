// Command garbage is a test guest that implements the ABI by hand,
// without the SDK, to return output that breaks it. What it returns
// depends on the record's value; "ok" gets a valid echo.
package main

import (
	"strconv"
	"unsafe"
)

// version is what processor_abi_version reports; tests set it with
// -ldflags=-X main.version=2.
var version = "1"

var (
	in  = make([]byte, 1<<16)
	res [4]uint32
	rec [8]uint32
	hdr [4]uint32
	msg = []byte("garbage guest error")

	// For "shared-headers": sharedRecs records that all point at one
	// table of sharedHdrs headers.
	sharedRecs [sharedN * 8]uint32
	sharedHdrs [sharedN * 4]uint32
	headerKey  = []byte("k")
)

const sharedN = 30000

//go:wasmexport processor_abi_version
func abiVersion() int32 {
	v, _ := strconv.Atoi(version)
	return int32(v)
}

//go:wasmexport processor_alloc
func alloc(size uint32) uint32 {
	if size > uint32(len(in)) {
		in = make([]byte, size)
	}
	return addr(unsafe.Pointer(&in[0]))
}

func addr(p unsafe.Pointer) uint32 { return uint32(uintptr(p)) }

func u32(b []byte, off int) uint32 {
	return uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16 | uint32(b[off+3])<<24
}

//go:wasmexport processor_process
func process(ptr, size uint32) uint32 {
	value := string(in[u32(in, 16) : u32(in, 16)+u32(in, 20)])
	valuePtr := ptr + u32(in, 16)
	res = [4]uint32{0, 1, addr(unsafe.Pointer(&rec[0])), 0}
	rec = [8]uint32{0, 0, 0, 0xFFFFFFFF, valuePtr, u32(in, 20), 0, 0}
	switch value {
	case "result-outside":
		return 0xFFFFFF00
	case "status":
		res[0] = 7
	case "count":
		res[1] = 1 << 30
	case "many":
		res[1] = 1 << 20 // allowed, but the 32MiB table runs off the end of memory
	case "table-outside":
		res[2] = 0xFFFF0000
	case "key-length":
		rec[3] = 0xFFFFFFFB // -5
	case "value-outside":
		rec[4] = 0xFFFFFFF0
	case "header-outside":
		rec[6], rec[7] = addr(unsafe.Pointer(&hdr[0])), 1
		hdr = [4]uint32{0xFFFFFFF0, 4, 0, 0xFFFFFFFF}
	case "null-header-key":
		rec[6], rec[7] = addr(unsafe.Pointer(&hdr[0])), 1
		hdr = [4]uint32{0, 0xFFFFFFFF, 0, 0xFFFFFFFF}
	case "shared-headers":
		// 30,000 records with the same 30,000 headers: 1.4MB of guest
		// memory that names 900,000,000 headers.
		for i := 0; i < sharedN; i++ {
			copy(sharedHdrs[i*4:], []uint32{addr(unsafe.Pointer(&headerKey[0])), 1, 0, 0xFFFFFFFF})
			copy(sharedRecs[i*8:], rec[:6])
			sharedRecs[i*8+6], sharedRecs[i*8+7] = addr(unsafe.Pointer(&sharedHdrs[0])), sharedN
		}
		res = [4]uint32{0, sharedN, addr(unsafe.Pointer(&sharedRecs[0])), 0}
	case "message-outside":
		res = [4]uint32{1, 10, 0xFFFFFFF8, 0}
	case "error":
		res = [4]uint32{1, uint32(len(msg)), addr(unsafe.Pointer(&msg[0])), 0}
	}
	return addr(unsafe.Pointer(&res[0]))
}

func main() {}
