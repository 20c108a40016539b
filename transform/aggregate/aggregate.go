// Package aggregate registers the "aggregate" transform, which keeps a
// count, sum, minimum or maximum per group key in a state store and emits
// the updated aggregate for every input record, exactly once: the store
// is written in the processor's Kafka transaction (see docs/state.md), so
// after an abort, a crash or a rebalance every key's aggregate goes on
// from its last committed value, never counting an input twice.
//
// FUNCTION is count, sum, min or max; FIELD the jq path of the number
// that sum, min and max read (.amount_cents); BY a jq expression for the
// group key (unset: the record key); WINDOW a Go duration for tumbling
// windows by record timestamp (unset: one running aggregate per key).
// Each output has the group key as its key and the JSON value
// {"key": <group key>, "value": <aggregate>}, with "window_start" and
// "window_end" (RFC 3339) when windowed; a record key that is not UTF-8
// is named {"base64": ...} (record.AppendKeyJSON). Numbers are exact:
// integers stay integers, decimals are summed without rounding, within a
// bound (groupkey.Bound) beyond which an input or a result fails its
// record. A window's entry
// expires from the store at the window's end, in record time; a record
// later than that starts the window again.
package aggregate

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/groupkey"
	"github.com/streamproc/processor/transform/jq"
)

func init() {
	transform.Register("aggregate", transform.Typed("keeps a count, sum, min or max per key (BY), optionally per tumbling WINDOW, exactly once, and emits each update", New))
}

// Settings are the aggregate transform's settings, one set per chain entry.
type Settings struct {
	// Function is count, sum, min or max.
	Function string `setting:"FUNCTION" default:"count" doc:"the aggregate: count, sum, min or max" form:"count, sum, min or max"`
	// Field is the jq path of the number sum, min and max read.
	Field string `setting:"FIELD" doc:"the number that sum, min and max read (unset for count)" form:"a jq path such as .amount_cents"`
	// By is the group key's jq expression; unset, the record key.
	By string `setting:"BY" doc:"the group key: a jq expression on the JSON value; unset, the record key" form:"a jq expression such as .customer_id"`
	// Window is the tumbling window's length; zero is a running total.
	Window time.Duration `setting:"WINDOW" doc:"tumbling windows of this length by record timestamp; unset, one running aggregate per key" form:"a Go duration such as 1m or 1h"`
	// PartitionedByKey declares the input partitioned by the group key
	// already: no repartition hop.
	PartitionedByKey bool `setting:"PARTITIONED_BY_KEY" default:"false" doc:"the input is already partitioned by the group key (BY), so no repartition hop is needed: records with one group key all arrive in one input partition" form:"true or false"`
	// Store names the state store (and its changelog topic).
	Store string `setting:"STORE" default:"aggregate" doc:"the state store's name; its changelog is <group>-<store>-changelog" form:"a-z A-Z 0-9 . _ - (unique in the chain)"`
}

// Transform is one aggregate stage.
type Transform struct {
	fn        string
	field     *jq.Program // nil for count
	fieldExpr string
	by        *groupkey.By
	window    time.Duration
	store     string
	byKey     bool // PartitionedByKey
}

// New checks the settings. Errors are *transform.SettingError.
func New(s *Settings) (transform.Transform, error) {
	t := &Transform{fn: s.Function, window: s.Window, store: s.Store, byKey: s.PartitionedByKey}
	switch s.Function {
	case "count":
	case "sum", "min", "max":
		if s.Field == "" {
			return nil, transform.Missing("FIELD", " (FUNCTION="+s.Function+" reads a number)")
		}
		p, err := jq.Compile(s.Field)
		if err != nil {
			return nil, jq.ExprError("FIELD", s.Field, err)
		}
		t.field, t.fieldExpr = p, s.Field
	default:
		return nil, transform.Invalid("FUNCTION", s.Function, "")
	}
	if s.Window < 0 {
		return nil, transform.Invalid("WINDOW", s.Window.String(), "")
	}
	by, err := groupkey.Compile(s.By)
	if err != nil {
		return nil, jq.ExprError("BY", s.By, err)
	}
	t.by = by
	if s.Store == "" {
		return nil, transform.Missing("STORE", "")
	}
	return t, nil
}

// Ordered returns true: each key's records must run in order.
func (t *Transform) Ordered() bool { return true }

// KeyScoped reports whether the group key is the record key (BY unset):
// see transform.KeyScoped.
func (t *Transform) KeyScoped() bool { return !t.by.NeedsValue() }

// Stores names the transform's one store.
func (t *Transform) Stores() []string { return []string{t.store} }

// GroupKey returns the bytes the record's state is kept by: see
// transform.GroupKeyer.
func (t *Transform) GroupKey(ctx context.Context, rec *kgo.Record) ([]byte, error) {
	return t.by.Group(ctx, rec)
}

// PartitionedByKey returns the PARTITIONED_BY_KEY setting: see
// transform.KeyPartitioned.
func (t *Transform) PartitionedByKey() bool { return t.byKey }

// Process updates the record's group aggregate and emits it in rec.
func (t *Transform) Process(ctx context.Context, _ transform.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	st, err := transform.StoreOf(ctx, t.store)
	if err != nil {
		return out, fmt.Errorf("aggregate: %w", err)
	}
	var v any
	if t.field != nil || t.by.NeedsValue() {
		if v, err = jq.ParseValue(rec.Value); err != nil {
			return out, err
		}
	}
	k, err := t.by.Key(ctx, rec, v)
	if err != nil {
		return out, err
	}
	start, end := time.Time{}, time.Time{}
	if t.window > 0 {
		start = rec.Timestamp.Truncate(t.window)
		end = start.Add(t.window)
		k = k.Window(start)
	}
	agg, err := t.update(ctx, st, k, v, end)
	if err != nil {
		return out, err
	}
	rec.Key = k.Out
	rec.Value = encode(k.JSON, agg, start, end)
	return append(out, rec), nil
}

// update reads the aggregate of k, folds the record in and writes it.
func (t *Transform) update(ctx context.Context, st transform.Store, k groupkey.Key, v any, expires time.Time) (string, error) {
	x, err := t.input(ctx, v)
	if err != nil {
		return "", err
	}
	prev, ok, legacy, err := groupkey.Get(st, k)
	if err != nil {
		return "", fmt.Errorf("aggregate: reading the store: %w", err)
	}
	if ok {
		p, err := groupkey.Parse(prev)
		if err != nil {
			return "", fmt.Errorf("aggregate: the store's %s of this key: %w", t.fn, err)
		}
		switch t.fn {
		case "count", "sum":
			x.Add(x, p)
		case "min":
			if p.Cmp(x) < 0 {
				x = p
			}
		case "max":
			if p.Cmp(x) > 0 {
				x = p
			}
		}
	}
	if err := groupkey.CheckBound(x, "the "+t.fn); err != nil {
		if t.field == nil {
			return "", fmt.Errorf("aggregate: %w", err)
		}
		return "", fmt.Errorf("FIELD %s: %w", t.fieldExpr, err)
	}
	s := groupkey.Format(x)
	if err := groupkey.Put(st, k, []byte(s), expires, legacy); err != nil {
		return "", fmt.Errorf("aggregate: writing the store: %w", err)
	}
	return s, nil
}

// input returns the number the record adds: 1 for count, FIELD's
// otherwise, within the bound.
func (t *Transform) input(ctx context.Context, v any) (*big.Rat, error) {
	if t.field == nil {
		return big.NewRat(1, 1), nil
	}
	r, err := groupkey.First(ctx, t.field, v)
	if err != nil {
		return nil, fmt.Errorf("FIELD %s: %w", t.fieldExpr, err)
	}
	x, err := groupkey.Number(r)
	if err != nil {
		return nil, fmt.Errorf("FIELD %s: %w", t.fieldExpr, err)
	}
	return x, nil
}

// encode returns {"key":js,"value":agg} with the window when one is set.
func encode(js []byte, agg string, start, end time.Time) []byte {
	b := make([]byte, 0, 32+len(js)+len(agg)+64)
	b = append(b, `{"key":`...)
	b = append(b, js...)
	b = append(b, `,"value":`...)
	b = append(b, agg...)
	if !end.IsZero() {
		b = append(b, `,"window_start":"`...)
		b = start.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","window_end":"`...)
		b = end.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}
