// Package topics interns the topic names transforms compute per record, so
// routing a record allocates no string once its topic has been seen. (Names
// are checked with topic.Valid.)
package topics

// maxInterned bounds an Interner: past it, strings are allocated per call
// rather than growing the table without end on high-cardinality data.
const maxInterned = 4096

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
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}
