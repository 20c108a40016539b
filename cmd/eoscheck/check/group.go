package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// A count grouped by a field of the value (the aggregate transform with
// BY set, e.g. PROCESSOR_AGGREGATE_BY=.customer) keeps one count per
// group key, whatever the input's keys and partitions: each output's
// record key is the group key of the input it counts (a string's text,
// any other value's JSON), its value {"key": <the group value>,
// "value": N}. Exactly once then means that every group's counts run 1,
// 2, 3, ... in the committed output up to the number of inputs taken
// with that group, across every input partition: a count kept per input
// partition (its max below N, counts repeating) fails it, as does an
// input counted twice, a count missing, or a count under another group
// than its input's. Options.GroupBy asks for it, with Options.Aggregate;
// Source.GroupBy makes the reader take each input's group key from its
// value (Run.InputKeys) in place of its record key.

// GroupPath is a path of object members into a JSON value, as jq writes
// it: ".customer", ".order.customer". The empty path means the record
// key.
type GroupPath []string

// ParseGroupPath parses a path of object members, each ".name" with a
// name of letters, digits and underscores not starting with a digit (the
// jq identifiers that need no quotes). It is a jq path, so that the same
// text is the processor's BY setting.
func ParseGroupPath(expr string) (GroupPath, error) {
	if expr == "" {
		return nil, nil
	}
	if !strings.HasPrefix(expr, ".") {
		return nil, fmt.Errorf("%q: want a path of object members such as .customer or .order.customer", expr)
	}
	var p GroupPath
	for _, name := range strings.Split(expr[1:], ".") {
		if !identifier(name) {
			return nil, fmt.Errorf("%q: want a path of object members such as .customer or .order.customer (names of letters, digits and _)", expr)
		}
		p = append(p, name)
	}
	return p, nil
}

// identifier reports whether s is a jq identifier: letters, digits and
// underscores, not starting with a digit.
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// String returns the path as jq writes it (".customer"), "" when empty.
func (p GroupPath) String() string {
	if len(p) == 0 {
		return ""
	}
	return "." + strings.Join(p, ".")
}

// Key returns the group key of a record whose value is value, as the
// aggregate transform makes an output's record key of it: the text of a
// string, the JSON of any other value (compacted, as the input holds it;
// a number is compared as written, so the group's field should hold
// strings or integers). ok is false when the value is not a JSON object
// along the path or the member is absent or null: the processor fails
// such a record (it has no group).
func (p GroupPath) Key(value []byte) (key string, ok bool) {
	raw := json.RawMessage(value)
	for _, name := range p {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return "", false
		}
		if raw, ok = obj[name]; !ok {
			return "", false
		}
	}
	return groupText(raw)
}

// groupText returns the record key the aggregate writes for the group
// value js (a JSON value): a string's text, another value's compact JSON;
// ok is false for null and for text that is not JSON.
func groupText(js []byte) (string, bool) {
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return "", false
	}
	if js[0] == '"' {
		var s string
		if err := json.Unmarshal(js, &s); err != nil {
			return "", false
		}
		return s, true
	}
	var b bytes.Buffer
	if err := json.Compact(&b, js); err != nil {
		return "", false
	}
	return b.String(), true
}

// checkGroupKey reports a CountKey anomaly when o's value does not name
// its record key as a group value, or its record key is not the group
// key of the input it counts (Run.InputKeys, read from the input's value
// by Source.GroupBy).
func (a *audit) checkGroupKey(o Output) {
	named, ok := groupText(o.CountKey)
	switch {
	case o.CountKey == nil:
		a.rp.add(CountKey, "%s (from %s): its value names no group; its record key is %q", o, o.Source, o.Key)
	case !ok:
		a.rp.add(CountKey, "%s (from %s): its value's key %.80s is not a group value; its record key is %q", o, o.Source, o.CountKey, o.Key)
	case named != o.Key:
		a.rp.add(CountKey, "%s (from %s): its value's key %.80s names another group than its record key %q", o, o.Source, o.CountKey, o.Key)
	}
	in, ok := a.run.InputKeys[o.Source]
	switch {
	case ok && in != o.Key:
		a.rp.add(CountKey, "%s (from %s): counted under %q, but its input's %s is %q", o, o.Source, o.Key, a.opts.GroupBy, in)
	case !ok && a.exists[o.Source]:
		a.rp.add(CountKey, "%s (from %s): counted under %q, but its input has no %s (the processor must fail it)", o, o.Source, o.Key, a.opts.GroupBy)
	}
}
