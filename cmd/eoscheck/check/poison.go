package check

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The fault drill writes, among its ordinary inputs, hard ones: poison
// records that must fail a transform or that the database refuses in one
// column, and records near Kafka's size limit. It marks each in its key,
// "poison-<class>-<seq>" (PoisonKey), so that the checker, which reads the
// inputs itself, knows what each one must become. Marks are read only when
// asked (Source.Poison, eoscheck -poison): a real topic's keys mean nothing
// to the checker.

// Class is the kind of a marked input, the part of its key after
// PoisonKeyPrefix and before the sequence number.
type Class string

// The classes of marked inputs, and what each must become.
const (
	// Ordinary is an unmarked input: one output (or row), never a dead
	// letter.
	Ordinary Class = ""
	// NotJSON is a value that is not JSON: a jq transform fails it, a
	// record failure that goes to PROCESSOR_ON_ERROR. It must become
	// exactly one visible dead letter (dead-letter topic or table), or
	// nothing where a skip instance dropped it (Options.Skipping).
	NotJSON Class = "notjson"
	// NearLimit is a JSON value of about 1,000,000 to 1,048,000 bytes,
	// whose output after the drill's jq program and the lineage headers
	// still fits Kafka's default max.message.bytes (1048588): it must come
	// out as one ordinary output or row, never a dead letter. A row of
	// it holds the value in the jsonb column.
	NearLimit Class = "nearlimit"
	// JSONBRefused is a JSON value that passes the drill's chain but that
	// PostgreSQL's jsonb refuses (an integer too long for numeric, an
	// escaped NUL, a lone surrogate escape): it must become exactly one
	// row whose value column is NULL and whose value_bytes holds the
	// output's bytes, among them the value's PoisonField verbatim.
	JSONBRefused Class = "jsonb"
)

// Classes lists the marked classes in report order.
var Classes = []Class{NotJSON, NearLimit, JSONBRefused}

// PoisonKeyPrefix begins the key of every marked input.
const PoisonKeyPrefix = "poison-"

// PoisonField is the member of a JSONBRefused input's JSON object holding
// the text jsonb refuses; its JSON text must appear verbatim in the row's
// value_bytes.
const PoisonField = "poison"

// PoisonKey returns the key the drill gives the marked input seq of class
// c, e.g. "poison-notjson-17".
func PoisonKey(c Class, seq int) string {
	return PoisonKeyPrefix + string(c) + "-" + strconv.Itoa(seq)
}

// Fails reports whether inputs of class c must fail the chain (and go to
// the error policy) rather than come out as outputs.
func (c Class) Fails() bool { return c == NotJSON }

// String returns the class's name, "ordinary" for Ordinary.
func (c Class) String() string {
	if c == Ordinary {
		return "ordinary"
	}
	return string(c)
}

// Mark is what the drill's key (and, for JSONBRefused, value) says about an
// input.
type Mark struct {
	Class Class
	// Payload, for JSONBRefused, is the JSON text of the value's
	// PoisonField, which the row's value_bytes must hold verbatim; nil
	// when the value has no such member (then any value_bytes will do).
	Payload []byte
}

// of names in, marked so, in an anomaly's example: "in/0@4", or with a
// class "notjson input in/0@4".
func (m Mark) of(in Input) string {
	if m.Class == Ordinary {
		return in.String()
	}
	return string(m.Class) + " input " + in.String()
}

// MarkOf returns the mark of an input record with the given key and value:
// Ordinary for a key without PoisonKeyPrefix or with an unknown class.
func MarkOf(key, value []byte) Mark {
	rest, ok := strings.CutPrefix(string(key), PoisonKeyPrefix)
	if !ok {
		return Mark{}
	}
	name, _, _ := strings.Cut(rest, "-")
	c := Class(name)
	switch c {
	case NotJSON, NearLimit:
		return Mark{Class: c}
	case JSONBRefused:
		var members map[string]json.RawMessage
		if json.Unmarshal(value, &members) == nil {
			if p, ok := members[PoisonField]; ok {
				return Mark{Class: c, Payload: []byte(p)}
			}
		}
		return Mark{Class: c}
	}
	return Mark{}
}

// ClassTotals count the marked inputs of one class and what became of
// them.
type ClassTotals struct {
	Inputs      int // inputs of the class
	Outputs     int // of them, inputs with a visible output or a row
	DeadLetters int // of them, inputs with a visible dead letter
	Skipped     int // of them, inputs skipped by policy (Options.Skipping)
}

// classTotals returns zero totals for each class that marks hold, nil
// when they hold none.
func classTotals(marks map[Input]Mark) map[Class]*ClassTotals {
	var t map[Class]*ClassTotals
	for _, m := range marks {
		if m.Class == Ordinary {
			continue
		}
		if t == nil {
			t = map[Class]*ClassTotals{}
		}
		if t[m.Class] == nil {
			t[m.Class] = &ClassTotals{}
		}
	}
	return t
}

// countClass adds one input of class c to totals t: whether it has an output
// (or row), a dead letter, and whether it was skipped by policy.
func countClass(t map[Class]*ClassTotals, c Class, output, dead, skipped bool) {
	ct := t[c]
	if ct == nil {
		return
	}
	ct.Inputs++
	if output {
		ct.Outputs++
	}
	if dead {
		ct.DeadLetters++
	}
	if skipped {
		ct.Skipped++
	}
}
