// Package topics interns the topic names transforms compute per record, so
// routing a record allocates no string once its topic has been seen. (Names
// are checked with topic.Valid.) The wasm transform interns its outputs'
// header keys with it too, which nothing bounds in length.
package topics

// maxInterned bounds an Interner: past it, strings are allocated per call
// rather than growing the table without end on high-cardinality data.
// maxLen bounds what it keeps in bytes: longer strings are never kept, so
// an Interner holds at most maxInterned*maxLen bytes (1MiB), whatever
// strings it is given. Topic names are at most 249 bytes.
const (
	maxInterned = 4096
	maxLen      = 256
)

// Interner returns one shared string per distinct byte sequence. The zero
// value is ready; it is not safe for concurrent use.
type Interner struct{ m map[string]string }

// String returns b as a string, allocating only the first time b is seen.
func (in *Interner) String(b []byte) string {
	if s, ok := in.m[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < maxInterned && len(s) <= maxLen {
		in.m[s] = s
	}
	return s
}
