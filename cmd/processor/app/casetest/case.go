// Package casetest reads the declarative test cases of `processor test
// FILE` (YAML), checks what the configured chain wrote for each case's
// inputs against its expectations, and reports like `go test`: PASS or
// FAIL per case, a diff per failing case (expected against got, per
// record), and a summary line. It runs nothing itself: the command hands
// it a Runner that runs a case's inputs through the chain as `processor
// try` runs them.
//
// The file is YAML, as the test files of comparable tools are, read with
// go.yaml.in/yaml/v3 (the YAML organisation's maintained line of yaml.v3,
// already a pinned dependency of the module): its yaml.Node tree gives
// every mistake a line number and tells an absent field from a null one.
package casetest

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
)

// File is a test file: variables for every case, and the cases.
type File struct {
	Path  string
	Env   [][2]string // PROCESSOR_* variables, in their order
	Cases []*Case
}

// Case is one test case: its inputs run through the chain with the
// file's and its own variables set, with state fresh for the case.
type Case struct {
	Name   string
	Line   int
	Env    [][2]string
	Exact  bool // values compared byte for byte, not as JSON
	Inputs []Input
	Expect Expect
}

// Input is one input record.
type Input struct {
	Line       int
	Key, Value []byte // nil: null
	Headers    [][2]string
	Timestamp  time.Time // zero: now
	Topic      string    // empty: the first input topic
	Partition  int32
}

// Expect is what a case's outputs must be; a nil field is not checked.
type Expect struct {
	Outputs     *[]Output // every output, in order, window closes included
	DeadLetters *[]Dead
	Filtered    *Inputs
	Late        *Inputs
}

// Output is an expected output record; a nil field is not checked.
type Output struct {
	Line    int
	Topic   *string
	Key     *[]byte // points to nil: a null key
	Value   *[]byte
	Headers [][2]string // each must be there with this value; others may be
	JQ      *gojq.Code  // must yield true on {topic, key, value, headers}
	jqText  string
	Exact   bool
}

// Dead is an expected dead letter.
type Dead struct {
	Line  int
	Input *int   // the input's index (from 0); nil: any
	Error string // a part of its error
	Stage string // empty: any
}

// Inputs is a count of inputs, or which ones (indexes from 0).
type Inputs struct {
	Count int
	Which []int // nil: only the count is checked
}

// Parse reads a test file; an error names path and the line.
func Parse(path string, data []byte) (*File, error) {
	f, err := parse(data)
	if err != nil {
		var le *lineError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("%s:%d: %s", path, le.line, le.msg)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Path = path
	return f, nil
}

func parse(data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errors.New("empty: want a mapping with cases")
	}
	top, err := fields(doc.Content[0], "the file", "env", "cases")
	if err != nil {
		return nil, err
	}
	f := &File{}
	if n := top["env"]; n != nil {
		if f.Env, err = envOf(n); err != nil {
			return nil, err
		}
	}
	cs := top["cases"]
	if cs == nil || cs.Kind != yaml.SequenceNode || len(cs.Content) == 0 {
		return nil, errorf(doc.Content[0], "cases: want a list of at least one case")
	}
	names := map[string]bool{}
	for _, n := range cs.Content {
		c, err := parseCase(n)
		if err != nil {
			return nil, err
		}
		if names[c.Name] {
			return nil, errorf(n, "case %q: a second case of that name", c.Name)
		}
		names[c.Name] = true
		f.Cases = append(f.Cases, c)
	}
	return f, nil
}

// envOf reads a mapping of PROCESSOR_* variables.
func envOf(n *yaml.Node) ([][2]string, error) {
	env, err := stringMap(n, "env")
	if err != nil {
		return nil, err
	}
	for i, kv := range env {
		if !strings.HasPrefix(kv[0], "PROCESSOR_") {
			return nil, errorf(n.Content[2*i], "env: %s is not a PROCESSOR_* variable", kv[0])
		}
	}
	return env, nil
}

// parseCase reads one case.
func parseCase(n *yaml.Node) (*Case, error) {
	c := &Case{Line: n.Line}
	wrap := func(err error) error {
		var le *lineError
		if errors.As(err, &le) && c.Name != "" {
			le.msg = fmt.Sprintf("case %q: %s", c.Name, le.msg)
		}
		return err
	}
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode && !isNull(n.Content[i+1]) {
			c.Name = n.Content[i+1].Value
		}
	}
	fs, err := fields(n, "a case", "name", "env", "exact", "input", "expect")
	if err != nil {
		return nil, wrap(err)
	}
	if c.Name == "" {
		return nil, errorf(n, "a case without a name")
	}
	if e := fs["env"]; e != nil {
		if c.Env, err = envOf(e); err != nil {
			return nil, wrap(err)
		}
	}
	if e := fs["exact"]; e != nil {
		if c.Exact, err = boolean(e, "exact"); err != nil {
			return nil, wrap(err)
		}
	}
	in := fs["input"]
	if in == nil || in.Kind != yaml.SequenceNode || len(in.Content) == 0 {
		return nil, wrap(errorf(n, "input: want a list of at least one record"))
	}
	for _, r := range in.Content {
		i, err := parseInput(r)
		if err != nil {
			return nil, wrap(err)
		}
		c.Inputs = append(c.Inputs, i)
	}
	if fs["expect"] == nil {
		return nil, wrap(errorf(n, "expect: missing (outputs, dead_letters, filtered, late)"))
	}
	if c.Expect, err = parseExpect(fs["expect"], len(c.Inputs)); err != nil {
		return nil, wrap(err)
	}
	return c, nil
}

// parseInput reads one input record.
func parseInput(n *yaml.Node) (Input, error) {
	in := Input{Line: n.Line}
	fs, err := fields(n, "an input record", "key", "value", "headers", "timestamp", "topic", "partition")
	if err != nil {
		return in, err
	}
	if k := fs["key"]; k != nil {
		if in.Key, err = valueBytes(k); err != nil {
			return in, err
		}
	}
	if v := fs["value"]; v != nil {
		if in.Value, err = valueBytes(v); err != nil {
			return in, err
		}
	}
	if h := fs["headers"]; h != nil {
		if in.Headers, err = stringMap(h, "headers"); err != nil {
			return in, err
		}
	}
	if t := fs["timestamp"]; t != nil {
		if in.Timestamp, err = timestamp(t); err != nil {
			return in, err
		}
	}
	if t := fs["topic"]; t != nil {
		if in.Topic, err = scalar(t, "topic"); err != nil {
			return in, err
		}
	}
	if p := fs["partition"]; p != nil {
		v, err := integer(p, "partition")
		if err != nil || v < 0 || v > 1<<31-1 {
			return in, errorf(p, "partition: want an integer from 0")
		}
		in.Partition = int32(v)
	}
	return in, nil
}

// Records are c's inputs as records: topic defaults to topic, the time
// to now, and offsets count from 0 per partition.
func (c *Case) Records(topic string, now time.Time) []*kgo.Record {
	next := map[string]int64{}
	recs := make([]*kgo.Record, 0, len(c.Inputs))
	for _, in := range c.Inputs {
		r := &kgo.Record{Topic: in.Topic, Partition: in.Partition, Key: in.Key, Value: in.Value, Timestamp: in.Timestamp}
		if r.Topic == "" {
			r.Topic = topic
		}
		if r.Timestamp.IsZero() {
			r.Timestamp = now
		}
		for _, h := range in.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		p := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		r.Offset = next[p]
		next[p]++
		recs = append(recs, r)
	}
	return recs
}
