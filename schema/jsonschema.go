package schema

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonSchemaBase is the URL a schema without its own $id is known by;
// references without an absolute name sit beside it, so that a relative
// $ref of a reference's name finds it.
const jsonSchemaBase = "mem://registry/"

// jsonCodec validates JSON against a compiled JSON Schema; the payload
// is the JSON itself.
type jsonCodec struct {
	schema *jsonschema.Schema
}

// noLoader refuses every URL the compiler would fetch: a schema reaches
// only itself and its registry references, never files or the network.
type noLoader struct{}

// Load refuses url.
func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not a reference of the schema (only registry references are loaded)", u)
}

// compileJSONSchema compiles s with its references as resources.
func compileJSONSchema(s Schema, refs []namedSchema) (codec, error) {
	comp := jsonschema.NewCompiler()
	comp.UseLoader(noLoader{})
	for _, r := range refs {
		if r.schema.Type != JSONSchema {
			return nil, fmt.Errorf("reference %q is a %s schema, not json_schema", r.name, r.schema.Type)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(r.schema.Text)))
		if err != nil {
			return nil, fmt.Errorf("reference %q is not JSON: %w", r.name, err)
		}
		if err := comp.AddResource(refURL(r.name), doc); err != nil {
			return nil, fmt.Errorf("reference %q: %w", r.name, err)
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s.Text)))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	main := jsonSchemaBase + "schema.json"
	if err := comp.AddResource(main, doc); err != nil {
		return nil, err
	}
	sch, err := comp.Compile(main)
	if err != nil {
		return nil, err
	}
	return &jsonCodec{schema: sch}, nil
}

// refURL is where a reference's schema is added: its name when that is
// an absolute URL, else beside the main schema.
func refURL(name string) string {
	if u, err := url.Parse(name); err == nil && u.IsAbs() {
		return name
	}
	return jsonSchemaBase + name
}

// index is nil: JSON Schema headers carry no message indexes.
func (c *jsonCodec) index() []int { return nil }

// validate parses js (numbers exactly) and validates it.
func (c *jsonCodec) validate(js []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return misfit("the value is not valid JSON: %v", err)
	}
	if err := c.schema.Validate(v); err != nil {
		return misfit("does not validate: %s", oneLine(err.Error()))
	}
	return nil
}

// oneLine turns the validator's message (a first line naming the schema,
// then one "- at '<instance location>': ..." line per failure) into one
// line for logs and dead-letter headers.
func oneLine(msg string) string {
	lines := strings.Split(msg, "\n")
	if len(lines) > 1 {
		lines = lines[1:]
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(l), "- ")
	}
	return strings.Join(lines, "; ")
}

// decode validates the payload and appends it unchanged.
func (c *jsonCodec) decode(payload []byte, _ []int, dst []byte) ([]byte, error) {
	if err := c.validate(payload); err != nil {
		return dst, err
	}
	return append(dst, payload...), nil
}

// encode validates js and appends it unchanged.
func (c *jsonCodec) encode(dst, js []byte) ([]byte, error) {
	if err := c.validate(js); err != nil {
		return dst, err
	}
	return append(dst, js...), nil
}
