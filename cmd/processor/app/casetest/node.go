package casetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The YAML nodes of a test file, read by hand so that every mistake names
// its line, an absent field is told from a null one, and the key order of
// a value written as YAML is kept in its JSON.

// lineError is a mistake in the file at a line.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// errorf is a lineError at n.
func errorf(n *yaml.Node, format string, args ...any) error {
	return &lineError{line: n.Line, msg: fmt.Sprintf(format, args...)}
}

// fields returns the fields of mapping n by name, refusing names not in
// known and names given twice.
func fields(n *yaml.Node, what string, known ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, errorf(n, "%s: want a mapping of %s", what, strings.Join(known, ", "))
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ok := false
		for _, name := range known {
			ok = ok || name == k.Value
		}
		switch {
		case !ok:
			return nil, errorf(k, "%s: unknown field %q (want %s)", what, k.Value, strings.Join(known, ", "))
		case out[k.Value] != nil:
			return nil, errorf(k, "%s: field %q given twice", what, k.Value)
		}
		out[k.Value] = v
	}
	return out, nil
}

// isNull reports whether n is YAML's null.
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// scalar returns the text of scalar n.
func scalar(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return "", errorf(n, "%s: want a string", what)
	}
	return n.Value, nil
}

// optString is the text of n, nil for null.
func optString(n *yaml.Node, what string) (*string, error) {
	if isNull(n) {
		return nil, nil
	}
	s, err := scalar(n, what)
	return &s, err
}

// integer returns the integer of n.
func integer(n *yaml.Node, what string) (int64, error) {
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Kind != yaml.ScalarNode || err != nil {
		return 0, errorf(n, "%s: want an integer", what)
	}
	return v, nil
}

// boolean returns the boolean of n.
func boolean(n *yaml.Node, what string) (bool, error) {
	v, err := strconv.ParseBool(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		return false, errorf(n, "%s: want true or false", what)
	}
	return v, nil
}

// stringMap reads a mapping of strings, in its order.
func stringMap(n *yaml.Node, what string) ([][2]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, errorf(n, "%s: want a mapping of strings", what)
	}
	var out [][2]string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode || isNull(v) {
			return nil, errorf(v, "%s: %s: want a string", what, k.Value)
		}
		out = append(out, [2]string{k.Value, v.Value})
	}
	return out, nil
}

// valueBytes is the bytes of a record's value (or key) as written: a
// string as it is, anything else (a mapping, a list, a number, a boolean)
// as JSON; nil for null.
func valueBytes(n *yaml.Node) ([]byte, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool" {
		return []byte(n.Value), nil
	}
	var b bytes.Buffer
	if err := writeJSON(&b, n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeJSON writes n as JSON, keeping the order of its mappings' keys.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(b, n)
	default:
		return errorf(n, "a value YAML cannot turn into JSON")
	}
	return nil
}

// writeScalar writes scalar n as JSON.
func writeScalar(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Tag {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		v, err := boolean(n, "value")
		if err != nil {
			return err
		}
		b.WriteString(strconv.FormatBool(v))
	case "!!int", "!!float":
		if !json.Valid([]byte(n.Value)) {
			return errorf(n, "number %s is not a JSON number", n.Value)
		}
		b.WriteString(n.Value)
	default:
		s, _ := json.Marshal(n.Value)
		b.Write(s)
	}
	return nil
}

// timestamp reads RFC 3339 or milliseconds since the epoch.
func timestamp(n *yaml.Node) (time.Time, error) {
	if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil && n.Kind == yaml.ScalarNode {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		return time.Time{}, errorf(n, "timestamp %q: want RFC 3339 or milliseconds since the epoch", n.Value)
	}
	return t, nil
}
