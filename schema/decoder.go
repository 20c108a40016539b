package schema

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// defaultMaxSchemas is DecoderOptions.MaxSchemas when it is 0.
const defaultMaxSchemas = 1000

// maxMessageIndexes bounds the Protobuf message-index list of a header.
const maxMessageIndexes = 64

// Decoder turns wire-format bytes into JSON. It caches compiled schemas
// by id (bounded, least recently used evicted), so that a record costs
// no registry call once its id is known; concurrent lookups of one
// unknown id make one registry call. It is safe for concurrent use.
type Decoder struct {
	reg     Registry
	format  Format
	cache   *Cache[*compiled]
	header  sr.ConfluentHeader
	timeout time.Duration
}

// DecoderOptions configure NewDecoder.
type DecoderOptions struct {
	// MaxSchemas bounds the compiled schemas kept; 0 means 1000.
	MaxSchemas int
	// Timeout bounds the registry lookups of a schema id not cached yet
	// (its schema and references) as a whole; 0 means no bound but the
	// client's per request. A caller whose records have a limit of their
	// own sets it below that limit, so that a registry that hangs is
	// FaultRegistry, not a record that ran out of time.
	Timeout time.Duration
}

// NewDecoder returns a Decoder of format f whose schemas come from reg.
func NewDecoder(reg Registry, f Format, o DecoderOptions) *Decoder {
	max := o.MaxSchemas
	if max <= 0 {
		max = defaultMaxSchemas
	}
	return &Decoder{reg: reg, format: f, cache: NewCache[*compiled](max), timeout: o.Timeout}
}

// compiled is a schema id's codec, with the record name of its schema
// (RecordName's; empty when it has none) for the formats whose record
// name does not depend on the record.
type compiled struct {
	c    codec
	name string
}

// Decode appends b's JSON form to dst (for Raw, b as it is). Errors are
// *Error: FaultRecord for the record's own faults, FaultRegistry or
// FaultCredentials when fetching its schema failed.
func (d *Decoder) Decode(ctx context.Context, b []byte, dst []byte) ([]byte, error) {
	out, _, err := d.decode(ctx, b, dst, false)
	return out, err
}

// DecodeNamed is Decode that also returns the record name of the
// writer's schema, the type that the record name strategies name
// subjects by (RecordName): for Protobuf the full name of the message
// the header's message indexes name. It is empty when the schema has
// none (an Avro union, a JSON schema without a title) and for Raw. It
// costs no more than Decode: the name is found once per schema id.
func (d *Decoder) DecodeNamed(ctx context.Context, b []byte, dst []byte) (out []byte, name string, err error) {
	return d.decode(ctx, b, dst, true)
}

// decode is Decode, and DecodeNamed when named.
func (d *Decoder) decode(ctx context.Context, b []byte, dst []byte, named bool) ([]byte, string, error) {
	if d.format == Raw {
		return append(dst, b...), "", nil
	}
	if len(b) == 0 || b[0] != 0 {
		return dst, "", faultf(FaultRecord, "no magic byte (the value is not in the Schema Registry wire format)")
	}
	id, payload, err := d.header.DecodeID(b)
	if err != nil {
		return dst, "", faultf(FaultRecord, "short record: %d bytes, fewer than the 5 of the Schema Registry header", len(b))
	}
	cd, err := d.cache.Get(ctx, id, func(ctx context.Context) (*compiled, error) {
		if d.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d.timeout)
			defer cancel()
		}
		return d.load(ctx, id)
	})
	if err != nil {
		return dst, "", withID(id, err)
	}
	var index []int
	if d.format == Protobuf {
		index, payload, err = d.header.DecodeIndex(payload, maxMessageIndexes)
		if err != nil {
			return dst, "", withID(id, faultf(FaultRecord, "schema id %d: the Protobuf message-index list does not decode: %v", id, err))
		}
	}
	out, err := cd.c.decode(payload, index, dst)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return dst, "", withID(id, err)
		}
		return dst, "", withID(id, faultf(FaultRecord, "does not decode as %s schema id %d: %v", d.format, id, err))
	}
	name := cd.name
	if named {
		if pc, ok := cd.c.(*protoCodec); ok {
			if md, err := pc.byIndex(index); err == nil { // decode succeeded: it does
				name = string(md.FullName())
			}
		}
	}
	return out, name, nil
}

// load fetches and compiles schema id.
func (d *Decoder) load(ctx context.Context, id int) (*compiled, error) {
	s, err := d.reg.SchemaByID(ctx, id)
	if err != nil {
		if FaultOf(err) == FaultRecord {
			return nil, faultf(FaultRecord, "the registry does not have the schema id the record names: %w", err)
		}
		return nil, withContext(FaultRegistry, err, "fetching schema id %d", id)
	}
	if s.Type != d.format {
		return nil, faultf(FaultRecord, "schema id %d is a %s schema, not %s: the record was written with another format", id, s.Type, d.format)
	}
	c, err := compile(ctx, d.reg, s, "")
	if err != nil {
		if f := FaultOf(err); f == FaultRegistry || f == FaultCredentials || errors.Is(err, errNotRegistryAPI) {
			return nil, err
		}
		return nil, faultf(FaultRecord, "schema id %d: %w", id, err)
	}
	cd := &compiled{c: c}
	switch s.Type {
	case Avro:
		cd.name = avroRecordName(s.Text)
	case JSONSchema:
		cd.name = jsonSchemaTitle(s.Text)
	}
	return cd, nil
}
