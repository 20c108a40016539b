// Package topic is the one rule for Kafka topic names, shared by the
// configuration (input, output and dead-letter topics) and by transforms
// that choose a topic per record.
package topic

// Valid reports whether name is a legal Kafka topic name: 1 to 249 of
// a-z A-Z 0-9 . _ -, and not "." or "..". It does not allocate, so
// transforms can check a topic per record.
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

// Form is the expected form of a topic name, for error messages.
const Form = "a topic name of 1 to 249 characters a-z A-Z 0-9 . _ -"
