// Package codec is the chain's schema stages: "decode", placed before the
// transform chain, turns keys and values in the Schema Registry wire
// format into JSON, and "encode", placed after it, turns the chain's JSON
// outputs into the wire format of each output topic's subject. The
// processor's wiring builds them from the format settings and frames
// every worker's chain with them (transform.Chain.Frame).
//
// A failure is sorted by whose fault it is (schema.Fault): a record that
// does not decode, or an output that does not fit its schema, fails that
// record under the error policy, and its dead letter keeps the original
// bytes; a registry that cannot be reached is transform.Unavailable (the
// transaction is retried, no record fails); a registry that refuses the
// processor's credentials is transform.Fatal (the processor stops).
package codec

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/transform"
)

// Stage names: what the errors and dead letters of a record the stages
// failed name as its failed transform.
const (
	DecodeStage = "decode"
	EncodeStage = "encode"
)

// Names are how the stages' errors name the settings an operator changes:
// the registry's (with its URL), and the formats'.
type Names struct {
	Registry string // e.g. PROCESSOR_SCHEMA_REGISTRY_URL=http://registry:8081
	// Credentials names the settings of the registry's credentials, e.g.
	// PROCESSOR_SCHEMA_REGISTRY_USERNAME and _PASSWORD.
	Credentials string
}

// Side is how one part of a record (its key or its value) is encoded on
// the way in and on the way out.
type Side struct {
	In, Out schema.Format
	// Decoder decodes inputs; required when In is not schema.Raw.
	Decoder *schema.Decoder
	// Encoders encode outputs; required when Out is not schema.Raw.
	Encoders *Encoders
}

// Framed reports whether Plan frames a chain that touches touches with
// stages for part (transform.PartKey or PartValue) of formats in and out:
// when the chain touches that part or the format changes on the way.
// Otherwise the part's bytes pass through, and it needs no encoder.
func Framed(touches, part transform.Parts, in, out schema.Format) bool {
	return touches&part != 0 || in != out
}

// Plan decides which stages a chain needs: a side is decoded and encoded
// when the chain touches that part of a record (transform.Toucher) or the
// output format differs from the input's (Framed); otherwise its bytes
// pass through untouched, undecoded. It returns the stages to frame the
// chain with (either may be nil: nothing to do).
//
// The stages of one call serve one chain: under a record strategy
// (Encoders.Named) the decode stage keeps the record type of the input in
// flight, and the encode stage encodes each of that input's outputs under
// the subject of that type. Call Plan for each chain.
func Plan(touches transform.Parts, key, value Side, names Names) (first, last []transform.Stage) {
	d := &decoder{names: names}
	e := &encoder{names: names, types: &d.types}
	for _, s := range []struct {
		side Side
		part transform.Parts
		dec  **schema.Decoder
		enc  **Encoders
	}{{key, transform.PartKey, &d.key, &e.key}, {value, transform.PartValue, &d.value, &e.value}} {
		if !Framed(touches, s.part, s.side.In, s.side.Out) {
			continue
		}
		if s.side.In != schema.Raw {
			*s.dec = s.side.Decoder
		}
		if s.side.Out != schema.Raw {
			*s.enc = s.side.Encoders
		}
	}
	d.namedKey = d.key != nil && e.key != nil && e.key.Named()
	d.namedValue = d.value != nil && e.value != nil && e.value.Named()
	if d.key != nil || d.value != nil {
		first = []transform.Stage{{Name: DecodeStage, T: d}}
	}
	if e.key != nil || e.value != nil {
		last = []transform.Stage{{Name: EncodeStage, T: e}}
	}
	return first, last
}

// types are the record types (record names) of the key and value of the
// input in flight, as the decode stage found them; empty when unknown or
// not needed.
type types struct {
	key, value string
}

// decoder is the decode stage of one chain.
type decoder struct {
	key, value *schema.Decoder
	// namedKey and namedValue: the encoders need the input's record type.
	namedKey, namedValue bool
	types                types
	names                Names
}

// Process replaces rec's key and value by their JSON, and notes their
// record types when the encoders need them. A null key or value (a
// tombstone) stays null.
func (d *decoder) Process(ctx context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	d.types = types{}
	if d.key != nil && rec.Key != nil {
		js, name, err := d.decode(ctx, d.key, d.namedKey, rec.Key)
		if err != nil {
			return out, classify("key", decodeFault(err), d.names)
		}
		rec.Key, d.types.key = js, name
	}
	if d.value != nil && rec.Value != nil {
		js, name, err := d.decode(ctx, d.value, d.namedValue, rec.Value)
		if err != nil {
			return out, classify("value", decodeFault(err), d.names)
		}
		rec.Value, d.types.value = js, name
	}
	return append(out, rec), nil
}

// decode decodes b with dec, and finds its record type when named.
func (d *decoder) decode(ctx context.Context, dec *schema.Decoder, named bool, b []byte) ([]byte, string, error) {
	if named {
		return dec.DecodeNamed(ctx, b, nil)
	}
	js, err := dec.Decode(ctx, b, nil)
	return js, "", err
}

// Touches returns every part: the stage rewrites keys and values.
func (d *decoder) Touches() transform.Parts { return transform.PartAll }

// encoder is the encode stage of the chain of its decoder.
type encoder struct {
	key, value *Encoders
	// types are the decode stage's: the input's record types.
	types *types
	names Names
}

// Process encodes rec's key and value with the schemas of their subjects:
// of rec's topic and, under a record strategy, of the record type of the
// input rec came from. A null key or value stays null.
func (e *encoder) Process(ctx context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	if e.key != nil && rec.Key != nil {
		b, err := e.key.Encode(ctx, rec.Topic, e.types.key, rec.Key)
		if err != nil {
			return out, classify("key", err, e.names)
		}
		rec.Key = b
	}
	if e.value != nil && rec.Value != nil {
		b, err := e.value.Encode(ctx, rec.Topic, e.types.value, rec.Value)
		if err != nil {
			return out, classify("value", err, e.names)
		}
		rec.Value = b
	}
	return append(out, rec), nil
}

// Touches returns every part: the stage rewrites keys and values.
func (e *encoder) Touches() transform.Parts { return transform.PartAll }

// decodeFault makes a FaultSchema of a decode the registry's: decoding a
// record meets one only when the registry's answers make no sense (a URL
// that answers 404 without a registry error code is not the registry's
// API), which no record causes and no record should be failed for.
func decodeFault(err error) error {
	if schema.FaultOf(err) == schema.FaultSchema {
		return &schema.Error{Fault: schema.FaultRegistry, Err: err}
	}
	return err
}

// classify marks err by whose fault it is: the registry's failures are
// transform.Unavailable, refused credentials transform.Fatal, and the
// rest the record's own (a plain, permanent error for the policy).
func classify(part string, err error, names Names) error {
	switch schema.FaultOf(err) {
	case schema.FaultRegistry:
		return transform.Unavailable(fmt.Errorf("the Schema Registry at %s cannot be reached: %w", names.Registry, err))
	case schema.FaultCredentials:
		return transform.Fatal(fmt.Errorf("the Schema Registry at %s refused the processor's credentials (%s): %w",
			names.Registry, names.Credentials, err))
	}
	return fmt.Errorf("%s: %w", part, err)
}
