// Package topics checks Kafka topic names and interns the ones transforms
// compute per record, so routing a record allocates no string once its
// topic has been seen.
package topics

// Valid reports whether name is a legal Kafka topic name: 1 to 249 of
// a-z A-Z 0-9 . _ -, and not "." or "..".
func Valid[S string | []byte](name S) bool {
	if len(name) == 0 || len(name) > 249 || string(name) == "." || string(name) == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Want is the expected form of a topic name, for error messages.
const Want = "a topic name of 1 to 249 characters a-z A-Z 0-9 . _ -"

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
