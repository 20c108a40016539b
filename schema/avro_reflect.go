package schema

import (
	"reflect"
	"sort"
)

// reflectBytes copies a byte array of any length ([N]byte, as hamba/avro
// holds a fixed default) into a slice; anything else gives nil.
func reflectBytes(v any) []byte {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 {
		return nil
	}
	out := make([]byte, rv.Len())
	reflect.Copy(reflect.ValueOf(out), rv)
	return out
}

// sortedKeys returns m's keys in order, so that a map default encodes
// the same way every time.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
