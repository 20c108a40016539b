package main

import "errors"

var errNotObject = errors.New("the value is not a JSON object")

// scanObject checks that b is one JSON object and calls member with the
// raw key (without quotes) and raw value of each of its top-level
// members. It returns the offset of the object's closing brace, with
// whitespace before it trimmed.
func scanObject(b []byte, member func(key, value []byte)) (int, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, errNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		if skipSpace(b, i+1) != len(b) {
			return 0, errNotObject
		}
		return i, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, errNotObject
		}
		k, ok := skipString(b, i)
		if !ok {
			return 0, errNotObject
		}
		key := b[i+1 : k-1]
		i = skipSpace(b, k)
		if i >= len(b) || b[i] != ':' {
			return 0, errNotObject
		}
		i = skipSpace(b, i+1)
		v, ok := skipValue(b, i)
		if !ok {
			return 0, errNotObject
		}
		member(key, b[i:v])
		end := v
		i = skipSpace(b, v)
		if i >= len(b) {
			return 0, errNotObject
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if skipSpace(b, i+1) != len(b) {
				return 0, errNotObject
			}
			return end, nil
		default:
			return 0, errNotObject
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns the offset after the value starting at b[i]. Nested
// objects and arrays are skipped by depth (their contents are not
// checked); scalars run to the next delimiter.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				j, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = j - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i, i > start
}
