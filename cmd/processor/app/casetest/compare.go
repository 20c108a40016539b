package casetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"unicode/utf8"
)

// Record is an output as written.
type Record struct {
	Topic      string
	Key, Value []byte // nil: null
	Headers    [][2]string
}

// DeadLetter is a dead letter as written: its error and the stage that
// failed.
type DeadLetter struct {
	Error, Stage string
}

// Result is what the chain did with one input, as `processor try` tells
// it: its outputs (first the records of the windows its stream time
// closed, then its own), or that it was dead-lettered, filtered, found
// late, skipped, failed the run, or not processed after an earlier one
// failed it.
type Result struct {
	Outputs      []Record
	Dead         *DeadLetter
	Filtered     bool
	Late         bool
	Skipped      bool
	Failed       string
	NotProcessed bool
}

// Check compares what c's inputs gave with c's expectations and returns
// the differences, one line each; none when the case passes.
func Check(c *Case, got []Result) []string {
	var diff []string
	for i, r := range got {
		switch {
		case r.Failed != "":
			diff = append(diff, fmt.Sprintf("input %d failed the run: %s", i, r.Failed))
		case r.NotProcessed:
			diff = append(diff, fmt.Sprintf("input %d was not processed: an earlier input failed the run", i))
		}
	}
	if c.Expect.Outputs != nil {
		diff = append(diff, checkOutputs(c, *c.Expect.Outputs, got)...)
	}
	if c.Expect.DeadLetters != nil {
		diff = append(diff, checkDead(*c.Expect.DeadLetters, got)...)
	}
	if c.Expect.Filtered != nil {
		diff = append(diff, checkInputs("filtered", c.Expect.Filtered, got, func(r Result) bool { return r.Filtered })...)
	}
	if c.Expect.Late != nil {
		diff = append(diff, checkInputs("late", c.Expect.Late, got, func(r Result) bool { return r.Late })...)
	}
	return diff
}

// checkOutputs compares every output, in order.
func checkOutputs(c *Case, want []Output, got []Result) []string {
	type out struct {
		input int
		r     Record
	}
	var all []out
	for i, r := range got {
		for _, o := range r.Outputs {
			all = append(all, out{i, o})
		}
	}
	var diff []string
	if len(all) != len(want) {
		diff = append(diff, fmt.Sprintf("outputs: expected %d, got %d", len(want), len(all)))
	}
	for i := range max(len(all), len(want)) {
		switch {
		case i >= len(all):
			diff = append(diff, fmt.Sprintf("output %d (line %d):", i, want[i].Line),
				"    expected: "+want[i].String(), "    got:      (none)")
		case i >= len(want):
			diff = append(diff, fmt.Sprintf("output %d (of input %d):", i, all[i].input),
				"    expected: (none)", "    got:      "+all[i].r.String())
		default:
			if why := want[i].mismatch(all[i].r, c.Exact); why != "" {
				diff = append(diff, fmt.Sprintf("output %d (of input %d, line %d): %s", i, all[i].input, want[i].Line, why),
					"    expected: "+want[i].String(), "    got:      "+all[i].r.String())
			}
		}
	}
	return diff
}

// mismatch says how r differs from o; empty when it matches.
func (o Output) mismatch(r Record, exact bool) string {
	var why []string
	if o.Topic != nil && *o.Topic != r.Topic {
		why = append(why, "topic differs")
	}
	if o.Key != nil && !sameBytes(*o.Key, r.Key, exact || o.Exact) {
		why = append(why, "key differs")
	}
	if o.Value != nil && !sameBytes(*o.Value, r.Value, exact || o.Exact) {
		why = append(why, "value differs")
	}
	for _, h := range o.Headers {
		if v, ok := header(r, h[0]); !ok {
			why = append(why, "header "+h[0]+" missing")
		} else if v != h[1] {
			why = append(why, "header "+h[0]+" differs")
		}
	}
	if o.JQ != nil {
		if res := o.predicate(r); res != "" {
			why = append(why, res)
		}
	}
	return strings.Join(why, "; ")
}

// header is r's last header named key.
func header(r Record, key string) (string, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i][0] == key {
			return r.Headers[i][1], true
		}
	}
	return "", false
}

// predicate runs o's jq on r as {topic, key, value, headers} (value parsed
// when it is JSON); empty when its first result is true.
func (o Output) predicate(r Record) string {
	hs := map[string]any{}
	for _, h := range r.Headers {
		hs[h[0]] = h[1]
	}
	in := map[string]any{"topic": r.Topic, "key": jqValue(r.Key), "value": jqValue(r.Value), "headers": hs}
	v, ok := o.JQ.Run(in).Next()
	switch {
	case !ok:
		return fmt.Sprintf("jq %s gave no result", o.jqText)
	case v == true:
		return ""
	}
	if err, isErr := v.(error); isErr {
		return fmt.Sprintf("jq %s failed: %v", o.jqText, err)
	}
	b, _ := json.Marshal(v)
	return fmt.Sprintf("jq %s gave %s, not true", o.jqText, b)
}

// jqValue is b parsed when it is JSON, else its text; nil for nil.
func jqValue(b []byte) any {
	if b == nil {
		return nil
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		return v
	}
	return string(b)
}

// sameBytes compares a and b: byte for byte when exact or when either is
// not JSON, else as JSON values (key order, spacing and the way a number
// is written do not count).
func sameBytes(a, b []byte, exact bool) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if exact || bytes.Equal(a, b) || !json.Valid(a) || !json.Valid(b) {
		return bytes.Equal(a, b)
	}
	return sameJSON(decodeJSON(a), decodeJSON(b))
}

// decodeJSON decodes valid JSON b with its numbers as written.
func decodeJSON(b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	_ = d.Decode(&v)
	return v
}

// sameJSON compares two decoded JSON values; numbers by their value.
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, sameJSON)
	}
	return a == b
}

// String shows the fields o checks.
func (o Output) String() string {
	var parts []string
	if o.Topic != nil {
		parts = append(parts, "topic="+*o.Topic)
	}
	if o.Key != nil {
		parts = append(parts, "key="+show(*o.Key))
	}
	if o.Value != nil {
		parts = append(parts, "value="+show(*o.Value))
	}
	for _, h := range o.Headers {
		parts = append(parts, "header "+h[0]+"="+show([]byte(h[1])))
	}
	if o.JQ != nil {
		parts = append(parts, "jq "+o.jqText)
	}
	return strings.Join(parts, " ")
}

// String shows r: topic, key, value and its headers.
func (r Record) String() string {
	parts := []string{"topic=" + r.Topic, "key=" + show(r.Key), "value=" + show(r.Value)}
	for _, h := range r.Headers {
		parts = append(parts, "header "+h[0]+"="+show([]byte(h[1])))
	}
	return strings.Join(parts, " ")
}

// show is b as it reads: JSON as it is, other text quoted, bytes that
// are not text in hex, null for nil.
func show(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case json.Valid(b) && !bytes.ContainsAny(b, "\n"):
		return string(b)
	case utf8.Valid(b):
		q, _ := json.Marshal(string(b))
		return string(q)
	}
	return fmt.Sprintf("0x%x", b)
}
