package srserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/avro"
)

// The schema types, as the API names them.
const (
	typeAvro     = "AVRO"
	typeProtobuf = "PROTOBUF"
	typeJSON     = "JSON"
)

// levels are the compatibility levels Confluent's registry knows.
var levels = map[string]bool{
	"NONE": true, "BACKWARD": true, "BACKWARD_TRANSITIVE": true, "FORWARD": true,
	"FORWARD_TRANSITIVE": true, "FULL": true, "FULL_TRANSITIVE": true,
}

func validLevel(l string) bool { return levels[l] }

// schemaType returns the API's name of a request's type ("" is Avro), or
// false when it is none.
func schemaType(t string) (string, bool) {
	switch strings.ToUpper(t) {
	case "", typeAvro:
		return typeAvro, true
	case typeProtobuf:
		return typeProtobuf, true
	case typeJSON:
		return typeJSON, true
	}
	return "", false
}

// canonical is the form of a schema's text that identity compares: JSON
// (Avro, JSON Schema) without insignificant whitespace, other text
// trimmed.
func canonical(typ, text string) string {
	if typ == typeAvro || typ == typeJSON {
		var b bytes.Buffer
		if json.Compact(&b, []byte(text)) == nil {
			return b.String()
		}
	}
	return strings.TrimSpace(text)
}

// identity is what makes two registrations one schema, one id.
func identity(typ, text string, refs []Reference) string {
	r, _ := json.Marshal(refs) // []Reference always encodes
	return typ + "\x00" + canonical(typ, text) + "\x00" + string(r)
}

// resolver finds the schema a reference names; called with mu held.
type resolver func(Reference) (stored, bool)

// validate checks a schema before it is stored: its references must
// exist; an Avro schema must parse (with the named types of its
// references), a JSON Schema must be JSON, a Protobuf one must not be
// empty (its syntax is not checked).
func validate(typ, text string, refs []Reference, resolve resolver) error {
	for _, r := range refs {
		if r.Name == "" || r.Subject == "" {
			return fmt.Errorf("reference %+v needs a name and a subject", r)
		}
		if _, ok := resolve(r); !ok {
			return fmt.Errorf("reference %q: subject %q has no version %d", r.Name, r.Subject, r.Version)
		}
	}
	switch typ {
	case typeAvro:
		_, err := parseAvro(text, refs, resolve)
		return err
	case typeJSON:
		if !json.Valid([]byte(text)) {
			return fmt.Errorf("a JSON Schema must be JSON")
		}
	case typeProtobuf:
		if strings.TrimSpace(text) == "" {
			return fmt.Errorf("the schema is empty")
		}
	}
	return nil
}

// parseAvro parses an Avro schema after the schemas it references (and
// theirs), so that it may use their named types.
func parseAvro(text string, refs []Reference, resolve resolver) (*avro.Schema, error) {
	cache := &avro.SchemaCache{}
	seen := map[int]bool{}
	var load func(refs []Reference, depth int) error
	load = func(refs []Reference, depth int) error {
		if depth > 32 {
			return fmt.Errorf("references nest deeper than 32")
		}
		for _, r := range refs {
			sc, ok := resolve(r)
			if !ok {
				return fmt.Errorf("reference %q not found", r.Name)
			}
			if seen[sc.ID] {
				continue
			}
			seen[sc.ID] = true
			if err := load(sc.References, depth+1); err != nil {
				return err
			}
			if _, err := cache.Parse(sc.Schema); err != nil {
				return fmt.Errorf("referenced schema %q: %w", r.Name, err)
			}
		}
		return nil
	}
	if err := load(refs, 0); err != nil {
		return nil, err
	}
	s, err := cache.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("invalid Avro schema: %w", err)
	}
	return s, nil
}

// compatible reports whether a new schema may follow the previous ones
// (oldest first) of a subject at level, with a message for each
// incompatibility. Only Avro is checked; other types pass at every level,
// but a change of type is refused unless the level is NONE.
func compatible(level string, next stored, previous []stored, resolve resolver) ([]string, error) {
	if level == "NONE" || len(previous) == 0 {
		return nil, nil
	}
	against := previous
	if !strings.HasSuffix(level, "_TRANSITIVE") {
		against = previous[len(previous)-1:]
	}
	base := strings.TrimSuffix(level, "_TRANSITIVE")
	var msgs []string
	for _, old := range against {
		if old.Type != next.Type {
			msgs = append(msgs, fmt.Sprintf("schema type %s differs from %s of id %d", next.Type, old.Type, old.ID))
			continue
		}
		if next.Type != typeAvro {
			continue
		}
		m, err := avroCompatible(base, next, old, resolve)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m...)
	}
	return msgs, nil
}

// avroCompatible checks next against old at base level (BACKWARD:
// next reads old's data; FORWARD: old reads next's; FULL: both), by
// avroReads (writer first, then reader).
func avroCompatible(base string, next, old stored, resolve resolver) ([]string, error) {
	ns, err := parseAvro(next.Schema, next.References, resolve)
	if err != nil {
		return nil, err
	}
	os, err := parseAvro(old.Schema, old.References, resolve)
	if err != nil {
		return nil, fmt.Errorf("stored schema %d: %w", old.ID, err)
	}
	var msgs []string
	if base == "BACKWARD" || base == "FULL" {
		if err := avroReads(os, ns); err != nil {
			msgs = append(msgs, fmt.Sprintf("cannot read data written with id %d: %v", old.ID, err))
		}
	}
	if base == "FORWARD" || base == "FULL" {
		if err := avroReads(ns, os); err != nil {
			msgs = append(msgs, fmt.Sprintf("id %d cannot read data written with it: %v", old.ID, err))
		}
	}
	return msgs, nil
}
