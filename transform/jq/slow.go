package jq

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FAST=false: every program runs in gojq alone, an escape hatch should the
// fast path (the identity shortcut, the steps in place, the direct subset,
// the byte parser and encoder) ever be suspected of an answer of its own.
// The value is parsed by encoding/json (Decoder.UseNumber, parseStd), the
// whole program runs in gojq on it, and each result is written by
// gojq.Marshal. The limit on a record's output bytes still holds, but is
// checked once a result is written whole: gojq.Marshal offers no way to
// stop earlier, so a single result may take its full size in memory
// before the record fails.

// Fast is the value of the FAST setting. Its zero value is on, so that
// Settings made in Go take the fast path, as the setting's default does.
type Fast struct {
	// Off is FAST=false: every program runs in gojq alone.
	Off bool
}

// UnmarshalText reads true or false (as strconv.ParseBool reads them).
func (f *Fast) UnmarshalText(b []byte) error {
	on, err := strconv.ParseBool(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	f.Off = !on
	return nil
}

// processSlow is Process with FAST=false.
func (t *Transform) processSlow(ctx context.Context, rec *kgo.Record, out []*kgo.Record, each int64) ([]*kgo.Record, error) {
	if rec.Value == nil {
		return out, errors.New("the value is null (a tombstone), not JSON")
	}
	v, err := parseStd(rec.Value)
	if err != nil {
		return out, err
	}
	return t.emit(t.prog.code.RunWithContext(ctx, v), rec, out, each)
}

// encode writes one result as JSON: by the encoder, which stops once it
// passes limit bytes, or with FAST=false by gojq.Marshal, the limit
// checked after it.
func (t *Transform) encode(v any, limit int) ([]byte, error) {
	if !t.slow {
		return t.fast.enc.encode(v, limit)
	}
	b, err := gojq.Marshal(v)
	if err == nil && len(b) > limit {
		return b, errTooLarge
	}
	return b, err
}
