// Package dedupe registers the "dedupe" transform, which filters out a
// record whose id was seen within a window before it, exactly once: the
// ids seen are kept in a state store written in the processor's Kafka
// transaction (see docs/state.md), so an abort, a crash or a rebalance
// neither lets a duplicate through nor drops a first sighting.
//
// BY is a jq expression for the id (unset: the record key); WINDOW (24h
// by default) is how long, in record time from its first sighting, an id
// is remembered: a record whose id was first seen at t is filtered when
// its timestamp is before t + WINDOW, whether it is ahead of or behind
// the partition's newest record, and passes (and is remembered anew)
// from then on. GRACE (1h by default) is the horizon behind the stream
// time (transform.StreamTimeOf) within which this holds: a record older
// than the stream time less GRACE is late, and is never judged against a
// store that may have forgotten its id: it passes, counted as late, or
// goes to the late topic when one is set (transform.Late). An id expires
// from the store once the stream time passes t + WINDOW + GRACE, so the
// outcome of every record is a function of the input in offset order.
package dedupe

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/groupkey"
	"github.com/streamproc/processor/transform/jq"
)

func init() {
	transform.Register("dedupe", transform.Typed("filters out records whose id (BY) was seen within WINDOW, exactly once", New))
}

// Settings are the dedupe transform's settings, one set per chain entry.
type Settings struct {
	// By is the id's jq expression; unset, the record key.
	By string `setting:"BY" doc:"the record's id: a jq expression on the JSON value; unset, the record key" form:"a jq expression such as .order_id"`
	// Window is how long an id is remembered, in record time.
	Window time.Duration `setting:"WINDOW" default:"24h" doc:"how long after its first sighting, by record timestamp, an id filters its duplicates" form:"a Go duration such as 10m or 24h"`
	// Grace is how far behind the stream time a record is still
	// deduplicated exactly.
	Grace time.Duration `setting:"GRACE" default:"1h" doc:"how far behind the partition's stream time a record's timestamp may be and still be deduplicated exactly; an older record is late: it passes (or goes to PROCESSOR_LATE_TOPIC), counted in processor_records_late_total; ids are kept for WINDOW plus GRACE" form:"a Go duration such as 0s, 10m or 1h"`
	// PartitionedByKey declares the input partitioned by the group key
	// already: no repartition hop.
	PartitionedByKey bool `setting:"PARTITIONED_BY_KEY" default:"false" doc:"the input is already partitioned by the group key (BY), so no repartition hop is needed: records with one group key all arrive in one input partition" form:"true or false"`
	// Store names the state store (and its changelog topic).
	Store string `setting:"STORE" default:"dedupe" doc:"the state store's name; its changelog is <group>-<store>-changelog" form:"a-z A-Z 0-9 . _ - (unique in the chain)"`
}

// Transform is one dedupe stage.
type Transform struct {
	by     *groupkey.By
	values *groupkey.Picker // parses values for BY
	window time.Duration
	grace  time.Duration
	store  string
	byKey  bool // PartitionedByKey
}

// New checks the settings. Errors are *settings.Error.
func New(s *Settings) (transform.Transform, error) {
	if s.Window <= 0 {
		return nil, transform.Invalid("WINDOW", s.Window.String(), "")
	}
	if s.Grace < 0 {
		return nil, transform.Invalid("GRACE", s.Grace.String(), "")
	}
	if s.Store == "" {
		return nil, transform.Missing("STORE", "")
	}
	by, err := groupkey.Compile(s.By)
	if err != nil {
		return nil, jq.ExprError("BY", s.By, err)
	}
	return &Transform{by: by, values: groupkey.NewPicker(by.Expr()), window: s.Window, grace: s.Grace, store: s.Store, byKey: s.PartitionedByKey}, nil
}

// Ordered returns true: each id's records must run in order.
func (t *Transform) Ordered() bool { return true }

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

// KeyScoped reports whether the id is the record key (BY unset): see
// transform.KeyScoped.
func (t *Transform) KeyScoped() bool { return !t.by.NeedsValue() }

// Process passes rec on unless its id was seen within the window.
func (t *Transform) Process(ctx context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	st, err := transform.StoreOf(ctx, t.store)
	if err != nil {
		return out, fmt.Errorf("dedupe: %w", err)
	}
	var v any
	if t.by.NeedsValue() {
		if v, err = t.values.Parse(rec.Value); err != nil {
			return out, err
		}
	}
	id, err := t.by.Key(ctx, rec, v) // a record key's bytes, or a BY value's JSON: the string "1" is not the number 1
	if err != nil {
		return out, err
	}
	ts := rec.Timestamp.UnixMilli()
	if stream, known := transform.StreamMillisOf(ctx); known {
		// Bounded as the stream time is: a timestamp ahead of it (beyond
		// the future skew) counts as it, none (below 0) as it too.
		if ts > stream || ts < 0 {
			ts = stream
		}
		if late := stream - t.grace.Milliseconds() - ts; late > 0 {
			// Passes, as no store can judge it: to the late topic when
			// one is set (Late routes it), on otherwise.
			transform.Late(ctx, rec, transform.LateInfo{Store: t.store, StreamTime: stream, By: late})
			return append(out, rec), nil
		}
	}
	prev, ok, legacy, err := groupkey.Get(st, id)
	if err != nil {
		return out, fmt.Errorf("dedupe: reading the store: %w", err)
	}
	if ok && len(prev) == 8 {
		seen := int64(binary.BigEndian.Uint64(prev))
		if ts < seen+t.window.Milliseconds() {
			return out, nil // a duplicate
		}
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ts))
	if err := groupkey.Put(st, id, b[:], time.UnixMilli(ts).Add(t.window+t.grace), legacy); err != nil {
		return out, fmt.Errorf("dedupe: writing the store: %w", err)
	}
	return append(out, rec), nil
}
