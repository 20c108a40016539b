// Package redact is an example compiled-in transform plugin: it registers
// the "redact" transform, which masks fields of JSON object values, e.g.
// for PROCESSOR_REDACT_FIELDS=card_number,email
//
//	{"card_number":"4111...","email":"a@b.c","amount_cents":100}
//	→ {"amount_cents":100,"card_number":"***","email":"***"}
//
// A processor binary gets it by blank-importing this package (see
// ../main.go); the processor then fills Settings from PROCESSOR_REDACT_*
// (PROCESSOR_REDACT_<ALIAS>_* for an aliased entry) and calls New once.
// The plugin itself never sees a variable name.
package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// init registers the transform in transform.Default, the registry the
// processor's main reads. transform.Typed ties the settings type to New,
// so New receives a filled *Settings and never reads the environment.
func init() {
	transform.Register("redact", transform.Typed("masks fields of JSON object values (PROCESSOR_REDACT_FIELDS)", New))
}

// Settings declare themselves in tags: setting is the name (the
// processor reads PROCESSOR_REDACT_<setting>), default its default, doc
// what it does and form the values it takes, which errors quote.
type Settings struct {
	Fields string `setting:"FIELDS" required:"true" doc:"the JSON fields to mask" form:"comma-separated top-level JSON fields to mask, e.g. card_number,email"`
	Mask   string `setting:"MASK" default:"***" doc:"what masked fields become" form:"any string; it is written as a JSON string"`
}

// Transform masks fields. It keeps no per-record state, so it is safe for
// concurrent use.
type Transform struct {
	fields []string
	mask   json.RawMessage
}

// New validates the settings. Returning a *settings.Error makes
// the processor print one line naming the variable and exit 2.
func New(s *Settings) (transform.Transform, error) {
	t := &Transform{}
	for f := range strings.SplitSeq(s.Fields, ",") {
		if f = strings.TrimSpace(f); f != "" {
			t.fields = append(t.fields, f)
		}
	}
	if len(t.fields) == 0 {
		if s.Fields == "" {
			return nil, transform.Missing("FIELDS", "")
		}
		return nil, transform.Invalid("FIELDS", s.Fields, "")
	}
	mask, err := json.Marshal(s.Mask)
	if err != nil {
		return nil, fmt.Errorf("encoding the mask: %w", err)
	}
	t.mask = mask
	return t, nil
}

// Process masks the fields present in rec's value, in place, and passes
// rec on. A value that is not a JSON object fails the record (a transform
// error: the processor stops, or the error policy applies).
func (t *Transform) Process(_ context.Context, _ transform.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(rec.Value, &obj); err != nil {
		return out, fmt.Errorf("the value is not a JSON object: %w", err)
	}
	changed := false
	for _, f := range t.fields {
		if _, ok := obj[f]; ok {
			obj[f] = t.mask
			changed = true
		}
	}
	if changed {
		v, err := json.Marshal(obj)
		if err != nil {
			return out, fmt.Errorf("encoding the redacted value: %w", err)
		}
		rec.Value = v
	}
	return append(out, rec), nil
}
