//go:build wasip1

package guest

import "unsafe"

// The host functions of the processor import module (../ABI.md, "State
// stores"). Addresses are of guest memory; a length is in bytes.

//go:wasmimport processor store_index
func hostStoreIndex(name unsafe.Pointer, nameLen uint32) int32

//go:wasmimport processor store_get
func hostStoreGet(store int32, key unsafe.Pointer, keyLen uint32, buf unsafe.Pointer, bufCap uint32) int32

//go:wasmimport processor store_put
func hostStorePut(store int32, key unsafe.Pointer, keyLen uint32, value unsafe.Pointer, valueLen uint32, expiresAt int64) int32

//go:wasmimport processor store_delete
func hostStoreDelete(store int32, key unsafe.Pointer, keyLen uint32) int32

//go:wasmimport processor stream_time
func hostStreamTime() int64

func streamTime() int64 { return hostStreamTime() }

func storeIndex(name string) int32 {
	return hostStoreIndex(unsafe.Pointer(unsafe.StringData(name)), uint32(len(name)))
}

func storeGet(i int32, key, buf []byte) int32 {
	return hostStoreGet(i, unsafe.Pointer(unsafe.SliceData(key)), uint32(len(key)), unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
}

func storePut(i int32, key, value []byte, expiresAt int64) int32 {
	return hostStorePut(i, unsafe.Pointer(unsafe.SliceData(key)), uint32(len(key)), unsafe.Pointer(unsafe.SliceData(value)), uint32(len(value)), expiresAt)
}

func storeDelete(i int32, key []byte) int32 {
	return hostStoreDelete(i, unsafe.Pointer(unsafe.SliceData(key)), uint32(len(key)))
}
