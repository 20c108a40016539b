package schema

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/sr"
)

// Encoder encodes JSON with one fixed registered schema. It is safe for
// concurrent use.
type Encoder struct {
	subject Subject
	codec   codec
	header  []byte // magic byte, id and (Protobuf) message indexes
}

// EncoderOptions configure NewEncoder.
type EncoderOptions struct {
	// Message is the Protobuf message's full name (package.Message);
	// empty means the first message of the schema file.
	Message string
}

// NewEncoder compiles s, resolving its references through reg. It is
// FaultSchema when s does not compile or its type is not a codec format.
func NewEncoder(ctx context.Context, reg Registry, s Subject, o EncoderOptions) (*Encoder, error) {
	if !s.Schema.Type.isCodec() {
		return nil, faultf(FaultSchema, "subject %q: schema type %q is not a codec format (avro, protobuf, json_schema)", s.Subject, s.Schema.Type)
	}
	c, err := compile(ctx, reg, s.Schema, o.Message)
	if err != nil {
		return nil, withContext(FaultSchema, err, "subject %q version %d (id %d)", s.Subject, s.Version, s.ID)
	}
	var h sr.ConfluentHeader
	header, _ := h.AppendEncode(nil, s.ID, c.index())
	return &Encoder{subject: s, codec: c, header: header}, nil
}

// Encode appends the wire form of the JSON value js to dst. A value
// that does not fit the schema is FaultRecord, its message naming the
// field.
func (e *Encoder) Encode(dst, js []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, e.header...)
	out, err := e.codec.encode(dst, js)
	if err != nil {
		var se *Error
		if errors.As(err, &se) {
			return dst[:start], err
		}
		return dst[:start], faultf(FaultRecord, "does not fit %s subject %q version %d: %v", e.subject.Schema.Type, e.subject.Subject, e.subject.Version, err)
	}
	return out, nil
}

// Subject returns the subject version the Encoder writes with.
func (e *Encoder) Subject() Subject { return e.subject }
