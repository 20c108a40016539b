package casetest

import (
	"github.com/itchyny/gojq"
	"go.yaml.in/yaml/v3"
)

// parseExpect reads a case's expectations; n is its number of inputs.
func parseExpect(n *yaml.Node, inputs int) (Expect, error) {
	var e Expect
	fs, err := fields(n, "expect", "outputs", "dead_letters", "filtered", "late")
	if err != nil {
		return e, err
	}
	if o := fs["outputs"]; o != nil {
		if o.Kind != yaml.SequenceNode {
			return e, errorf(o, "outputs: want a list of records ([] for none)")
		}
		outs := []Output{}
		for _, r := range o.Content {
			out, err := parseOutput(r)
			if err != nil {
				return e, err
			}
			outs = append(outs, out)
		}
		e.Outputs = &outs
	}
	if d := fs["dead_letters"]; d != nil {
		if d.Kind != yaml.SequenceNode {
			return e, errorf(d, "dead_letters: want a list ([] for none)")
		}
		dead := []Dead{}
		for _, r := range d.Content {
			x, err := parseDead(r, inputs)
			if err != nil {
				return e, err
			}
			dead = append(dead, x)
		}
		e.DeadLetters = &dead
	}
	for name, dst := range map[string]**Inputs{"filtered": &e.Filtered, "late": &e.Late} {
		if n := fs[name]; n != nil {
			if *dst, err = parseInputs(n, name, inputs); err != nil {
				return e, err
			}
		}
	}
	return e, nil
}

// parseOutput reads an expected output record.
func parseOutput(n *yaml.Node) (Output, error) {
	o := Output{Line: n.Line}
	fs, err := fields(n, "an expected output", "topic", "key", "value", "headers", "jq", "exact")
	if err != nil {
		return o, err
	}
	if len(fs) == 0 {
		return o, errorf(n, "an expected output checks nothing: give topic, key, value, headers or jq")
	}
	if t := fs["topic"]; t != nil {
		s, err := scalar(t, "topic")
		if err != nil {
			return o, err
		}
		o.Topic = &s
	}
	for name, dst := range map[string]**[]byte{"key": &o.Key, "value": &o.Value} {
		if v := fs[name]; v != nil {
			b, err := valueBytes(v)
			if err != nil {
				return o, err
			}
			*dst = &b
		}
	}
	if h := fs["headers"]; h != nil {
		if o.Headers, err = stringMap(h, "headers"); err != nil {
			return o, err
		}
	}
	if x := fs["exact"]; x != nil {
		if o.Exact, err = boolean(x, "exact"); err != nil {
			return o, err
		}
	}
	if q := fs["jq"]; q != nil {
		if o.jqText, err = scalar(q, "jq"); err != nil {
			return o, err
		}
		parsed, err := gojq.Parse(o.jqText)
		if err == nil {
			o.JQ, err = gojq.Compile(parsed)
		}
		if err != nil {
			return o, errorf(q, "jq %q: %v", o.jqText, err)
		}
	}
	return o, nil
}

// parseDead reads an expected dead letter.
func parseDead(n *yaml.Node, inputs int) (Dead, error) {
	d := Dead{Line: n.Line}
	fs, err := fields(n, "an expected dead letter", "input", "error", "stage")
	if err != nil {
		return d, err
	}
	if i := fs["input"]; i != nil {
		v, err := integer(i, "input")
		if err != nil || v < 0 || v >= int64(inputs) {
			return d, errorf(i, "input: want the index of an input, from 0 to %d", inputs-1)
		}
		x := int(v)
		d.Input = &x
	}
	if m := fs["error"]; m != nil {
		if d.Error, err = scalar(m, "error"); err != nil {
			return d, err
		}
	}
	if s := fs["stage"]; s != nil {
		if d.Stage, err = scalar(s, "stage"); err != nil {
			return d, err
		}
	}
	return d, nil
}

// parseInputs reads a count of inputs or a list of their indexes.
func parseInputs(n *yaml.Node, what string, inputs int) (*Inputs, error) {
	if n.Kind == yaml.ScalarNode {
		v, err := integer(n, what)
		if err != nil || v < 0 {
			return nil, errorf(n, "%s: want a count, or a list of input indexes", what)
		}
		return &Inputs{Count: int(v)}, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, errorf(n, "%s: want a count, or a list of input indexes", what)
	}
	out := &Inputs{Which: []int{}}
	for _, c := range n.Content {
		v, err := integer(c, what)
		if err != nil || v < 0 || v >= int64(inputs) {
			return nil, errorf(c, "%s: want the index of an input, from 0 to %d", what, inputs-1)
		}
		out.Which = append(out.Which, int(v))
	}
	out.Count = len(out.Which)
	return out, nil
}
