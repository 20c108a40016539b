//go:build wasip1

package guest

import "unsafe"

//go:wasmimport processor table_lookup
func hostTableLookup(name unsafe.Pointer, nameLen uint32, key unsafe.Pointer, keyLen uint32, buf unsafe.Pointer, bufCap uint32) int32

func tableLookup(table string, key, buf []byte) int32 {
	return hostTableLookup(unsafe.Pointer(unsafe.StringData(table)), uint32(len(table)),
		unsafe.Pointer(unsafe.SliceData(key)), uint32(len(key)), unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
}
