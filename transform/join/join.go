// Package join registers the "join" transform, which enriches each record
// with the row of its key in a table topic, exactly once: a stream-table
// join, as Kafka Streams' KStream-KTable (MODE=co_partitioned) and
// KStream-GlobalKTable (MODE=global) joins are.
//
// TABLE is the table topic: compacted, keyed by the table's key, its
// values JSON (or a Schema Registry format, decoded as inputs are). The
// processor keeps it locally and current (state.Table); this transform
// only reads it. BY is a jq expression for the lookup key (unset: the
// record key); a string result is looked up as its UTF-8 bytes, any other
// as its JSON. TYPE inner filters a record whose key has no row (counted
// in processor_join_misses_total{table}); left passes it with a null row.
// The output value is the record's value with the row put at the jq path
// INTO, or the result of EXPR, a jq expression over {"record": value,
// "row": row}.
//
// What a record sees: the table as this instance has read it when the
// record is processed (latest row per key by offset). A retried record
// may see a newer row than an aborted attempt did; only one output is
// ever visible. A row written after a record was processed does not
// change that record's output.
package join

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/groupkey"
	"github.com/streamproc/processor/transform/jq"
)

func init() {
	transform.Register("join", transform.Typed("joins each record with the row of its key in a table topic (TABLE), exactly once", New))
}

// Settings are the join transform's settings, one set per chain entry.
type Settings struct {
	// Table is the table topic.
	Table string `setting:"TABLE" required:"true" doc:"the table topic: compacted, keyed by the table's key, its values JSON or in the input's Schema Registry format" form:"a topic name"`
	// By is the lookup key's jq expression; unset, the record key.
	By string `setting:"BY" doc:"the lookup key: a jq expression on the JSON value (a string is looked up as its bytes, any other value as its JSON); unset, the record key" form:"a jq expression such as .customer_id"`
	// Type is inner or left.
	Type string `setting:"TYPE" default:"inner" doc:"inner: a record whose key has no row is filtered out, counted in processor_join_misses_total; left: it passes with a null row" form:"inner or left"`
	// Into is the jq path the row is put at.
	Into string `setting:"INTO" doc:"the jq path in the record's value where the row is put (or EXPR)" form:"a jq path such as .customer"`
	// Expr is the output value's jq expression over {record, row}.
	Expr string `setting:"EXPR" doc:"the output value: a jq expression over {\"record\": the value, \"row\": the row or null} (or INTO)" form:"a jq expression such as .record + {name: .row.name}"`
	// Mode is co_partitioned or global.
	Mode string `setting:"MODE" default:"co_partitioned" doc:"co_partitioned: partition p of the table joins partition p of the input (same partition count, same partitioner and key); global: every instance keeps the whole table" form:"co_partitioned or global"`
}

// Transform is one join stage.
type Transform struct {
	table  string
	global bool
	left   bool
	by     *jq.Program // nil: the record key
	out    *jq.Program // over {record, row}
	t      transform.Table
}

// New checks the settings. Errors are *settings.Error.
func New(s *Settings) (transform.Transform, error) {
	t := &Transform{table: s.Table}
	if s.Table == "" {
		return nil, transform.Missing("TABLE", "")
	}
	switch s.Type {
	case "inner":
	case "left":
		t.left = true
	default:
		return nil, transform.Invalid("TYPE", s.Type, "")
	}
	switch s.Mode {
	case "co_partitioned":
	case "global":
		t.global = true
	default:
		return nil, transform.Invalid("MODE", s.Mode, "")
	}
	if s.By != "" {
		p, err := jq.Compile(s.By)
		if err != nil {
			return nil, jq.ExprError("BY", s.By, err)
		}
		t.by = p
	}
	var err error
	switch {
	case s.Into != "" && s.Expr != "":
		return nil, transform.Invalid("INTO", s.Into, ", or EXPR, not both")
	case s.Into != "":
		if _, err := jq.Compile("path(" + s.Into + ")"); err != nil {
			return nil, jq.ExprError("INTO", s.Into, err)
		}
		if t.out, err = jq.Compile(".row as $row | .record | (" + s.Into + ") = $row"); err != nil {
			return nil, jq.ExprError("INTO", s.Into, err)
		}
	case s.Expr != "":
		if t.out, err = jq.Compile(s.Expr); err != nil {
			return nil, jq.ExprError("EXPR", s.Expr, err)
		}
	default:
		return nil, transform.Missing("INTO", ", or EXPR")
	}
	return t, nil
}

// JoinTables implements transform.Joiner: the TABLE setting's topic.
func (t *Transform) JoinTables() []transform.TableRef {
	return []transform.TableRef{{Topic: t.table, Global: t.global, TableSetting: "TABLE", ModeSetting: "MODE"}}
}

// BindTable implements transform.Joiner.
func (t *Transform) BindTable(topic string, tb transform.Table) {
	if topic == t.table {
		t.t = tb
	}
}

// Ordered returns true: a partition's records join the table in offset
// order, so that a later record never sees an older table than an
// earlier one did.
func (t *Transform) Ordered() bool { return true }

// errNoTable fails a record where no table was bound.
var errNoTable = errors.New("join: no table: the transform runs where the processor keeps no table")

// Process joins rec with its key's row.
func (t *Transform) Process(ctx context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	if t.t == nil {
		return out, errNoTable
	}
	v, err := jq.ParseValue(rec.Value)
	if err != nil {
		return out, err
	}
	key, err := t.key(ctx, rec, v)
	if err != nil {
		return out, err
	}
	var row any
	found := false
	if key != nil {
		b, ok, err := t.t.Lookup(src.Partition, key)
		if err != nil {
			return out, transform.Unavailable(fmt.Errorf("join: table %s: %w", t.table, err))
		}
		if ok {
			if row, err = jq.ParseValue(b); err != nil {
				return out, fmt.Errorf("join: the row of key %q in table %s: %w", key, t.table, err)
			}
			found = true
		}
	}
	if !found {
		t.t.Miss()
		if !t.left {
			return out, nil
		}
	}
	r, ok := t.out.Run(ctx, map[string]any{"record": v, "row": row}).Next()
	if !ok {
		return out, nil // EXPR gave no result: filtered
	}
	if e, isErr := r.(error); isErr {
		return out, jq.RunError(e)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return out, fmt.Errorf("join: encoding the output: %w", err)
	}
	rec.Value = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return append(out, rec), nil
}

// key is rec's lookup key: the record key, or BY's result (a string's
// bytes, another value's JSON); nil when there is none (a null key or
// BY result), which no row has.
func (t *Transform) key(ctx context.Context, rec *kgo.Record, v any) ([]byte, error) {
	if t.by == nil {
		return rec.Key, nil
	}
	r, err := groupkey.First(ctx, t.by, v)
	if err != nil {
		return nil, fmt.Errorf("BY: %w", err)
	}
	switch r := r.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(r), nil
	}
	js, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("BY: encoding the key: %w", err)
	}
	return js, nil
}
