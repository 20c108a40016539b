// Package aggregate registers the "aggregate" transform, which keeps a
// count, sum, minimum or maximum per group key in a state store and emits
// the updated aggregate for every input record, exactly once: the store
// is written in the processor's Kafka transaction (see docs/state.md), so
// after an abort, a crash or a rebalance every key's aggregate goes on
// from its last committed value, never counting an input twice.
//
// FUNCTION is count, sum, min or max; FIELD the jq path of the number
// that sum, min and max read (.amount_cents); BY a jq expression for the
// group key (unset: the record key); WINDOW a Go duration for windows by
// record timestamp (unset: one running aggregate per key), tumbling, or
// hopping by WINDOW_ADVANCE; GRACE (default 0) how long after a window's
// end, in stream time (transform.StreamTimeOf), its records are still
// counted. Each output has the JSON value {"key": <group key>, "value":
// <aggregate>}, with "window_start" and "window_end" (RFC 3339) when
// windowed; its key is the group key, or when windowed the group key and
// the window: <group key>@<window start, Unix milliseconds>, so that a
// compacted view holds every window. A record key that is not UTF-8 is
// named {"base64": ...} (record.AppendKeyJSON). Numbers are exact:
// integers stay integers, decimals are summed without rounding, within a
// bound (groupkey.Bound) beyond which an input or a result fails its
// record. A window closes once the stream time reaches its end plus
// GRACE: its entry expires from the store then, and a record of it that
// comes later is late (transform.Late): dropped, or written to the late
// topic, counted either way; never counted into a new window. EMIT is
// update (an output for every input, as above) or close: with WINDOW,
// no output per input but exactly one per key and window, its final
// aggregate, written when the window closes in the transaction that
// deletes its entry (close.go, transform.WindowEmitter).
package aggregate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/groupkey"
	"github.com/streamproc/processor/transform/jq"
)

func init() {
	transform.Register("aggregate", transform.Typed("keeps a count, sum, min or max per key (BY), optionally per tumbling or hopping WINDOW with GRACE, exactly once, and emits each update", New))
}

// Settings are the aggregate transform's settings, one set per chain entry.
type Settings struct {
	// Function is count, sum, min or max.
	Function string `setting:"FUNCTION" default:"count" doc:"the aggregate: count, sum, min or max" form:"count, sum, min or max"`
	// Field is the jq path of the number sum, min and max read.
	Field string `setting:"FIELD" doc:"the number that sum, min and max read (unset for count)" form:"a jq path such as .amount_cents"`
	// By is the group key's jq expression; unset, the record key.
	By string `setting:"BY" doc:"the group key: a jq expression on the JSON value; unset, the record key" form:"a jq expression such as .customer_id"`
	// Window is the window's length; zero is a running total.
	Window time.Duration `setting:"WINDOW" doc:"windows of this length by record timestamp, tumbling unless WINDOW_ADVANCE is set; unset, one running aggregate per key" form:"a Go duration such as 1m or 1h"`
	// Advance is how far apart hopping windows start; zero is WINDOW
	// (tumbling).
	Advance time.Duration `setting:"WINDOW_ADVANCE" doc:"hopping windows: a new WINDOW-long window starts every WINDOW_ADVANCE, and a record counts in each window it falls in; unset, tumbling windows" form:"a Go duration from 1ms up to WINDOW, at most 1000 windows a record"`
	// Grace is how long after a window's end its records still count.
	Grace time.Duration `setting:"GRACE" default:"0s" doc:"how long after a window's end, in the partition's stream time, a record of it still counts; a later one is late: dropped, or written to PROCESSOR_LATE_TOPIC, counted in processor_records_late_total" form:"a Go duration such as 0s or 10m"`
	// Emit is update (an output for every input) or close (one final
	// output per key and window, once it closes).
	Emit string `setting:"EMIT" default:"update" doc:"update: an output for every input, the window's aggregate so far; close (with WINDOW): exactly one output per key and window, its final aggregate, once the stream time passes the window's end plus GRACE" form:"update or close"`
	// PartitionedByKey declares the input partitioned by the group key
	// already: no repartition hop.
	PartitionedByKey bool `setting:"PARTITIONED_BY_KEY" default:"false" doc:"the input is already partitioned by the group key (BY), so no repartition hop is needed: records with one group key all arrive in one input partition" form:"true or false"`
	// Store names the state store (and its changelog topic).
	Store string `setting:"STORE" default:"aggregate" doc:"the state store's name; its changelog is <group>-<store>-changelog" form:"a-z A-Z 0-9 . _ - (unique in the chain)"`
}

// Transform is one aggregate stage.
type Transform struct {
	fn        string
	field     *groupkey.Expr // nil for count
	fieldExpr string
	by        *groupkey.By
	window    int64 // milliseconds; 0: no windows
	advance   int64 // milliseconds
	grace     int64 // milliseconds
	close     bool  // EMIT=close
	store     string
	byKey     bool             // PartitionedByKey
	values    *groupkey.Picker // parses values for FIELD and BY
	buf       []byte           // update's scratch: the stored entry (Process runs on one goroutine at a time)
}

// maxWindowsPerRecord bounds the hopping windows a record counts in
// (WINDOW / WINDOW_ADVANCE).
const maxWindowsPerRecord = 1000

// New checks the settings. Errors are *settings.Error.
func New(s *Settings) (transform.Transform, error) {
	t := &Transform{fn: s.Function, window: s.Window.Milliseconds(), grace: s.Grace.Milliseconds(), store: s.Store, byKey: s.PartitionedByKey}
	switch s.Function {
	case "count":
	case "sum", "min", "max":
		if s.Field == "" {
			return nil, transform.Missing("FIELD", " (FUNCTION="+s.Function+" reads a number)")
		}
		p, err := groupkey.CompileExpr(s.Field)
		if err != nil {
			return nil, jq.ExprError("FIELD", s.Field, err)
		}
		t.field, t.fieldExpr = p, s.Field
	default:
		return nil, transform.Invalid("FUNCTION", s.Function, "")
	}
	if s.Window < 0 || (s.Window > 0 && s.Window < time.Millisecond) {
		return nil, transform.Invalid("WINDOW", s.Window.String(), "")
	}
	switch {
	case s.Advance == 0:
		t.advance = t.window
	case s.Window == 0:
		return nil, transform.Invalid("WINDOW_ADVANCE", s.Advance.String(), " (hopping windows need a WINDOW)")
	case s.Advance < time.Millisecond || s.Advance > s.Window || s.Window/s.Advance > maxWindowsPerRecord:
		return nil, transform.Invalid("WINDOW_ADVANCE", s.Advance.String(), "")
	default:
		t.advance = s.Advance.Milliseconds()
	}
	switch s.Emit {
	case "update", "": // unset: the default
	case "close":
		if s.Window == 0 {
			return nil, transform.Invalid("EMIT", s.Emit, " (a final output per window needs a WINDOW)")
		}
		t.close = true
	default:
		return nil, transform.Invalid("EMIT", s.Emit, "")
	}
	if s.Grace < 0 {
		return nil, transform.Invalid("GRACE", s.Grace.String(), "")
	}
	by, err := groupkey.Compile(s.By)
	if err != nil {
		return nil, jq.ExprError("BY", s.By, err)
	}
	t.by, t.values = by, groupkey.NewPicker(t.field, by.Expr())
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
func (t *Transform) Process(ctx context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	st, err := transform.StoreOf(ctx, t.store)
	if err != nil {
		return out, fmt.Errorf("aggregate: %w", err)
	}
	var v any
	if t.field != nil || t.by.NeedsValue() {
		if v, err = t.values.Parse(rec.Value); err != nil {
			return out, err
		}
	}
	k, err := t.by.Key(ctx, rec, v)
	if err != nil {
		return out, err
	}
	if t.window == 0 {
		agg, err := t.update(ctx, st, k, v, time.Time{}, record.Source{Offset: -1})
		if err != nil {
			return out, err
		}
		rec.Key = k.Out
		rec.Value = encode(k.JSON, agg, time.Time{}, time.Time{})
		return append(out, rec), nil
	}
	from := transform.OriginOf(ctx, src)
	if from.Topic == src.Topic && from.Partition == src.Partition {
		from.Topic = "" // the entry's own: its offset is enough (stored)
	}
	return t.windows(ctx, st, k, v, from, rec, out)
}

// windows folds rec into each open window it falls in, oldest first, and
// emits each one's update; a record whose windows have all closed is late.
func (t *Transform) windows(ctx context.Context, st transform.Store, k groupkey.Key, v any, from record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	ts := rec.Timestamp.UnixMilli()
	stream, known := transform.StreamMillisOf(ctx)
	if known && (ts > stream || ts < 0) {
		ts = stream // bounded as the stream time is
	}
	last := floorTo(ts, t.advance)                       // the latest window's start
	first := floorTo(ts-t.window, t.advance) + t.advance // the earliest's
	if known && last+t.window+t.grace <= stream {
		transform.Late(ctx, rec, transform.LateInfo{Store: t.store, StreamTime: stream, By: stream - (last + t.window + t.grace),
			WindowStart: last, WindowEnd: last + t.window, Windowed: true})
		if rec.Topic != "" {
			return append(out, rec), nil // to the late topic
		}
		return out, nil
	}
	key, headers, stamp := k.Out, rec.Headers, rec.Timestamp
	emitted := false
	for start := first; start <= last; start += t.advance {
		end := start + t.window
		if known && end+t.grace <= stream {
			continue // closed: the record counts in the windows still open
		}
		agg, err := t.update(ctx, st, k.Window(time.UnixMilli(start)), v, time.UnixMilli(end+t.grace), from)
		if err != nil {
			return out, err
		}
		if t.close {
			continue // emitted once it closes (Closed)
		}
		o := rec
		if emitted {
			o = &kgo.Record{Headers: slices.Clone(headers), Timestamp: stamp}
		}
		o.Key = windowKey(key, start)
		o.Value = encode(k.JSON, agg, time.UnixMilli(start), time.UnixMilli(end))
		out, emitted = append(out, o), true
	}
	return out, nil
}

// floorTo is the largest multiple of step at or below x.
func floorTo(x, step int64) int64 {
	q := x / step
	if x%step != 0 && x < 0 {
		q--
	}
	return q * step
}

// windowKey is the key of a windowed output: the group key, "@", and
// the window's start in Unix milliseconds.
func windowKey(key []byte, start int64) []byte {
	b := make([]byte, 0, len(key)+21)
	b = append(append(b, key...), '@')
	return strconv.AppendInt(b, start, 10)
}

// update reads the aggregate of k, folds the record in and writes it,
// with EMIT=close followed by the input's (stored). The aggregate's text
// is returned in t.buf, valid until the next call.
func (t *Transform) update(ctx context.Context, st transform.Store, k groupkey.Key, v any, expires time.Time, from record.Source) ([]byte, error) {
	x, err := t.input(ctx, v)
	if err != nil {
		return nil, err
	}
	prev, ok, legacy, err := groupkey.Get(st, k)
	if err != nil {
		return nil, fmt.Errorf("aggregate: reading the store: %w", err)
	}
	if ok {
		p, err := groupkey.ParseNum(aggOf(prev))
		if err != nil {
			return nil, fmt.Errorf("aggregate: the store's %s of this key: %w", t.fn, err)
		}
		x = combine(t.fn, x, p)
	}
	if err := groupkey.CheckNumBound(x, "the "+t.fn); err != nil {
		if t.field == nil {
			return nil, fmt.Errorf("aggregate: %w", err)
		}
		return nil, fmt.Errorf("FIELD %s: %w", t.fieldExpr, err)
	}
	t.buf = t.stored(x.AppendText(t.buf[:0]), from)
	if err := groupkey.Put(st, k, t.buf, expires, legacy); err != nil {
		return nil, fmt.Errorf("aggregate: writing the store: %w", err)
	}
	return aggOf(t.buf), nil
}

// combine is the aggregate of the input x and the stored p.
func combine(fn string, x, p groupkey.Num) groupkey.Num {
	switch fn {
	case "count", "sum":
		return groupkey.Add(x, p)
	case "min":
		if groupkey.Cmp(p, x) < 0 {
			return p
		}
	case "max":
		if groupkey.Cmp(p, x) > 0 {
			return p
		}
	}
	return x
}

// input returns the number the record adds: 1 for count, FIELD's
// otherwise, within the bound.
func (t *Transform) input(ctx context.Context, v any) (groupkey.Num, error) {
	if t.field == nil {
		return groupkey.IntNum(1), nil
	}
	r, err := t.field.First(ctx, v)
	if err != nil {
		return groupkey.Num{}, fmt.Errorf("FIELD %s: %w", t.fieldExpr, err)
	}
	x, err := groupkey.NumOf(r)
	if err != nil {
		return groupkey.Num{}, fmt.Errorf("FIELD %s: %w", t.fieldExpr, err)
	}
	return x, nil
}

// encode returns {"key":js,"value":agg} with the window when one is set.
func encode(js, agg []byte, start, end time.Time) []byte {
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
