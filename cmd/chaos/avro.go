package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/schema"
)

// The Avro schemas of -value-format avro. The input's first version has
// the ordinary value's key and seq and the nearlimit class's pad (empty
// in an ordinary value); its second, registered halfway through the
// input, adds half (2 in every value written with it) with a default, a
// BACKWARD compatible change. The output's is the second input version
// with seen added, as `.seen = true` makes it, with a default too: it
// encodes the chain's output of either input version (a value of the
// first has no half, and the output gets its default, 1).
const (
	inputSchemaV1 = `{"type":"record","name":"Input","namespace":"chaos","fields":[` +
		`{"name":"key","type":"string"},{"name":"seq","type":"long"},{"name":"pad","type":"string","default":""}]}`
	inputSchemaV2 = `{"type":"record","name":"Input","namespace":"chaos","fields":[` +
		`{"name":"key","type":"string"},{"name":"seq","type":"long"},{"name":"pad","type":"string","default":""},` +
		`{"name":"half","type":"int","default":1}]}`
	outputSchema = `{"type":"record","name":"Output","namespace":"chaos","fields":[` +
		`{"name":"key","type":"string"},{"name":"seq","type":"long"},{"name":"pad","type":"string","default":""},` +
		`{"name":"half","type":"int","default":1},{"name":"seen","type":"boolean","default":false}]}`
)

// avroJQExpr is the only jq program the output schema fits.
const avroJQExpr = ".seen = true"

// unknownSchemaID is the schema id of the badid variant: none the run
// registers (a registry holds a few).
const unknownSchemaID = 999_999

// avroPoisonVariants are the variants of each class with -value-format
// avro: the notjson class holds values the decode stage fails, three
// without the magic byte (plain text, the JSON object unencoded, bytes
// that are not UTF-8), one whose header names a schema id the registry
// does not have, and one cut short inside the Avro body.
var avroPoisonVariants = map[check.Class][]string{
	check.NotJSON:   {"text", "json", "binary", "badid", "cut"},
	check.NearLimit: {"pad"},
}

// variantsOf returns the variants of class c in the drill's format.
func (d *driver) variantsOf(c check.Class) []string {
	if d.o.valueFormat == "avro" {
		return avroPoisonVariants[c]
	}
	return poisonVariants[c]
}

// setUpSchemas readies the registry of -value-format avro: the one of
// -schema-registry, or one started in this process on loopback. It
// registers the input's first schema version under <input>-value and the
// output's under <output>-value, and returns how to stop the registry.
func (d *driver) setUpSchemas() (func(), error) {
	stop := func() {}
	d.registryURL = d.o.registryURL
	if d.registryURL == "" {
		srv, err := srserver.New(srserver.Options{})
		if err != nil {
			return nil, err
		}
		if d.registryURL, err = srv.Start(context.Background(), "127.0.0.1:0"); err != nil {
			return nil, err
		}
		stop = func() { _ = srv.Close() }
	}
	reg, err := schema.NewClient(schema.ClientOptions{URLs: []string{d.registryURL}})
	if err != nil {
		stop()
		return nil, err
	}
	d.reg = reg
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := reg.Register(ctx, d.in+"-value", schema.Schema{Type: schema.Avro, Text: inputSchemaV1})
	if err == nil {
		d.outSubject, err = reg.Register(ctx, d.out+"-value", schema.Schema{Type: schema.Avro, Text: outputSchema})
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("registering the drill's schemas at %s: %w", d.registryURL, err)
	}
	d.inSubjects = []schema.Subject{in}
	return stop, nil
}

// avroInputs encodes the input values of -value-format avro: with the
// input subject's first version up to the half of the input, with its
// second (registered then) from there on.
type avroInputs struct {
	d       *driver
	half    int // the first input written with the second version
	enc     *schema.Encoder
	version int // the input version enc writes, 1 or 2
}

// newAvroInputs returns the encoder of the input's first version.
func (d *driver) newAvroInputs() (*avroInputs, error) {
	enc, err := schema.NewEncoder(context.Background(), d.reg, d.inSubjects[0], schema.EncoderOptions{})
	if err != nil {
		return nil, err
	}
	return &avroInputs{d: d, half: d.o.records / 2, enc: enc, version: 1}, nil
}

// at readies the encoder for input seq: at the half of the input it
// registers the second version (under faults: the processors meet the
// new schema id while they are killed, stopped and restarted).
func (a *avroInputs) at(seq int) error {
	if seq < a.half || a.version == 2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v2, err := a.d.reg.Register(ctx, a.d.in+"-value", schema.Schema{Type: schema.Avro, Text: inputSchemaV2})
	if err != nil {
		return fmt.Errorf("registering the input's second schema version: %w", err)
	}
	if a.enc, err = schema.NewEncoder(ctx, a.d.reg, v2, schema.EncoderOptions{}); err != nil {
		return err
	}
	a.version = 2
	a.d.mu.Lock()
	a.d.inSubjects = append(a.d.inSubjects, v2)
	a.d.mu.Unlock()
	a.d.log.Info("second input schema version registered", "subject", v2.Subject, "version", v2.Version, "id", v2.ID, "from_input", seq)
	return nil
}

// ordinary returns the wire form of the ordinary value {"key":…,"seq":…}
// (with "half":2 from the half on).
func (a *avroInputs) ordinary(key string, seq int) ([]byte, error) {
	return a.encode(inputValue{Key: key, Seq: seq})
}

// encode returns the wire form of v under the current schema version
// (with "half":2 from the half on).
func (a *avroInputs) encode(v inputValue) ([]byte, error) {
	if a.version == 2 {
		v.Half = 2
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return a.enc.Encode(nil, js)
}

// poison returns the value of variant v of the marked input seq (key its
// key) in the wire format's terms (avroPoisonVariants), or for pad an
// Avro record of nearLimitMin to nearLimitMax bytes.
func (a *avroInputs) poison(rng *rand.Rand, v, key string, seq int) ([]byte, error) {
	switch v {
	case "text", "binary":
		return poisonInput(rng, v, key, seq), nil
	case "json":
		return json.Marshal(inputValue{Key: key, Seq: seq})
	case "pad":
		return a.nearLimit(rng, key, seq)
	}
	b, err := a.ordinary(key, seq)
	if err != nil {
		return nil, err
	}
	if v == "badid" {
		binary.BigEndian.PutUint32(b[1:5], unknownSchemaID)
		return b, nil
	}
	// cut: the header and the first bytes of the key, whose length
	// prefix says there are more.
	return b[:5+3], nil
}

// nearLimit returns an Avro record whose wire form is nearLimitMin to
// nearLimitMax bytes: its pad random letters and digits, so that
// compression does not hide the size from the broker.
func (a *avroInputs) nearLimit(rng *rand.Rand, key string, seq int) ([]byte, error) {
	size := nearLimitMin + rng.IntN(nearLimitMax-nearLimitMin+1)
	head, err := a.ordinary(key, seq)
	if err != nil {
		return nil, err
	}
	// The empty pad takes one byte (its length, 0); a pad of about
	// 1 MB takes three for its length.
	pad := make([]byte, size-(len(head)-1)-3)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	for i := range pad {
		pad[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return a.encode(inputValue{Key: key, Seq: seq, Pad: string(pad)})
}
