package schema

import "context"

// codec is one compiled schema: it turns a payload (what follows the
// header) into JSON and JSON into a payload.
type codec interface {
	// decode appends payload's JSON form to dst; index is the Protobuf
	// message-index list (nil for the other formats).
	decode(payload []byte, index []int, dst []byte) ([]byte, error)
	// encode appends js's payload to dst.
	encode(dst, js []byte) ([]byte, error)
	// index is the message-index list the encoder writes (Protobuf only).
	index() []int
}

// maxReferenceDepth bounds how deep references may nest, so that a cycle
// in the registry ends in an error rather than a stack overflow.
const maxReferenceDepth = 32

// namedSchema is a referenced schema's text under the name it is
// imported by.
type namedSchema struct {
	name   string
	schema Schema
}

// resolveReferences returns the schemas s references, depth first (a
// reference's own references before it), each once.
func resolveReferences(ctx context.Context, reg Registry, s Schema) ([]namedSchema, error) {
	var out []namedSchema
	seen := make(map[string]bool)
	var walk func(refs []Reference, depth int) error
	walk = func(refs []Reference, depth int) error {
		if depth > maxReferenceDepth {
			return faultf(FaultSchema, "references nest deeper than %d: is there a cycle?", maxReferenceDepth)
		}
		for _, r := range refs {
			if seen[r.Name] {
				continue
			}
			seen[r.Name] = true
			sub, err := reg.SubjectVersion(ctx, r.Subject, r.Version)
			if err != nil {
				return withContext(FaultSchema, err, "reference %q (subject %q version %d)", r.Name, r.Subject, r.Version)
			}
			if err := walk(sub.Schema.References, depth+1); err != nil {
				return err
			}
			out = append(out, namedSchema{name: r.Name, schema: sub.Schema})
		}
		return nil
	}
	if err := walk(s.References, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// compile turns s into a codec, fetching its references from reg. A
// schema that does not compile is FaultSchema; callers that decode
// records re-classify it.
func compile(ctx context.Context, reg Registry, s Schema, message string) (codec, error) {
	refs, err := resolveReferences(ctx, reg, s)
	if err != nil {
		return nil, err
	}
	var c codec
	switch s.Type {
	case Avro:
		c, err = compileAvro(s, refs)
	case Protobuf:
		c, err = compileProtobuf(ctx, s, refs, message)
	case JSONSchema:
		c, err = compileJSONSchema(s, refs)
	default:
		return nil, faultf(FaultSchema, "schema type %q is not a codec format (avro, protobuf, json_schema)", s.Type)
	}
	if err != nil {
		return nil, withContext(FaultSchema, err, "%s schema does not compile", s.Type)
	}
	return c, nil
}
