//go:build !wasip1

package guest

// Built natively, for unit tests of a plugin's logic, the stores are maps
// of the test process: every name is declared, nothing expires, and
// nothing is undone when the Func fails. ResetStores empties them.

var memStores []map[string][]byte

func storeIndex(name string) int32 {
	if s, ok := stores[name]; ok && s.idx >= 0 {
		return s.idx
	}
	memStores = append(memStores, map[string][]byte{})
	return int32(len(memStores) - 1)
}

func storeGet(i int32, key, buf []byte) int32 {
	v, ok := memStores[i][string(key)]
	if !ok {
		return resultNone
	}
	copy(buf, v)
	return int32(len(v))
}

func storePut(i int32, key, value []byte, _ int64) int32 {
	memStores[i][string(key)] = append([]byte{}, value...)
	return 0
}

// nativeStreamTime is what StreamTime gives built natively (SetStreamTime).
var nativeStreamTime int64 = -1

// SetStreamTime sets what StreamTime returns in a plugin built natively,
// for its unit tests; -1 is none. It exists only when built for another
// platform than wasip1.
func SetStreamTime(ms int64) { nativeStreamTime = ms }

func streamTime() int64 { return nativeStreamTime }

func storeDelete(i int32, key []byte) int32 {
	delete(memStores[i], string(key))
	return 0
}

// ResetStores empties every store, for a fresh start between tests of a
// plugin built natively. It exists only when built for another platform
// than wasip1.
func ResetStores() {
	for _, m := range memStores {
		clear(m)
	}
}
