package schema

import "sort"

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
