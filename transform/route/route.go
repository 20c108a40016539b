// Package route registers the "route" transform, which chooses each
// record's output topic: from a jq program on the JSON value
// (the EXPR setting, whose first result must be a topic name) or from a
// header (the HEADER setting, its last occurrence). Exactly one of
// the two must be set.
//
// A record the rule cannot place (the header is missing, the program has
// no result or a result that is not a string, or names no valid topic)
// goes to the DEFAULT topic when that is set, and is a transform
// error otherwise. A value that is not JSON and a jq runtime error are
// transform errors either way, as is a topic equal to the record's input
// topic, which would feed the record back into the processor. Routing
// allocates nothing per record once a topic has been seen.
//
// The DEFAULT topic must exist when the processor starts, like its output
// topic. A topic the rule chooses that the cluster confirms does not
// exist fails the record under the processor's error policy (the processor
// checks this, and refuses routes to its input and dead-letter topics).
package route

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/topic"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/topics"
	"github.com/streamproc/processor/transform/jq"
)

func init() {
	transform.Register("route", transform.Typed("chooses each record's output topic from a jq program (EXPR) or a header (HEADER)", New))
}

// Settings are the route transform's settings, one set per chain entry.
type Settings struct {
	// Expr is a jq program whose first result is the topic.
	Expr string `setting:"EXPR" doc:"a jq program choosing each record's topic (or set HEADER)" form:"a jq program whose first result is a topic name, e.g. \"orders-\" + .region"`
	// Header is the name of the header holding the topic.
	Header string `setting:"HEADER" doc:"a record header naming each record's topic (or set EXPR)" form:"the name of a record header holding the topic name, e.g. destination"`
	// Default is where records the rule cannot place go; unset, they fail.
	Default string `setting:"DEFAULT" doc:"where records go that the rule cannot place; unset, they fail under the error policy" form:"a topic name (a-z A-Z 0-9 . _ -, at most 249 characters) for records the rule cannot place"`
}

// Transform sets rec.Topic. Like every transform it is called from one
// goroutine at a time.
type Transform struct {
	prog   *jq.Program // nil when routing by header
	header string
	def    string
	names  topics.Interner
}

// New checks the settings: exactly one of Expr and Header, a program that
// compiles, a valid default topic. Errors are *settings.Error.
func New(s *Settings) (transform.Transform, error) {
	switch {
	case s.Expr == "" && s.Header == "":
		return nil, transform.Missing("EXPR", "; or set ", settings.Ref("HEADER"), " to route by a header")
	case s.Expr != "" && s.Header != "":
		return nil, &settings.Error{Field: "HEADER", Value: s.Header,
			Want: settings.Say("unset while ", settings.Ref("EXPR"), " is set: exactly one of the two chooses the topic")}
	}
	if s.Default != "" && !topic.Valid(s.Default) {
		return nil, transform.Invalid("DEFAULT", s.Default, "")
	}
	t := &Transform{header: s.Header, def: s.Default}
	if s.Expr != "" {
		p, err := jq.Compile(s.Expr)
		if err != nil {
			return nil, jq.ExprError("EXPR", s.Expr, err)
		}
		t.prog = p
	}
	return t, nil
}

// Destinations names the default topic, so that the processor checks at
// start that it exists, as it does for its output topic.
func (t *Transform) Destinations() map[string]string {
	if t.def == "" {
		return nil
	}
	return map[string]string{"DEFAULT": t.def}
}

var _ transform.Destinations = (*Transform)(nil)

// errUnplaced marks a record the rule could not place; with a default
// topic it goes there instead of failing.
var errUnplaced = errors.New("no topic for the record")

// Process sets rec.Topic and appends rec.
func (t *Transform) Process(ctx context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	topic, err := t.topic(ctx, rec)
	if errors.Is(err, errUnplaced) && t.def != "" {
		topic, err = t.def, nil
	}
	if err != nil {
		return out, err
	}
	if topic == src.Topic {
		return out, fmt.Errorf("the record would be routed to its own input topic %q, feeding it back into the processor", topic)
	}
	rec.Topic = topic
	return append(out, rec), nil
}

// topic applies the rule; errUnplaced-wrapped errors may fall back to the
// default topic.
func (t *Transform) topic(ctx context.Context, rec *kgo.Record) (string, error) {
	if t.prog == nil {
		for i := len(rec.Headers) - 1; i >= 0; i-- {
			if h := rec.Headers[i]; h.Key == t.header {
				if !topic.Valid(h.Value) {
					return "", fmt.Errorf("%w: header %q is %q, not %s", errUnplaced, t.header, h.Value, topic.Form)
				}
				return t.names.String(h.Value), nil
			}
		}
		return "", fmt.Errorf("%w: header %q is missing", errUnplaced, t.header)
	}
	v, err := jq.ParseValue(rec.Value)
	if err != nil {
		return "", err
	}
	r, ok := t.prog.Run(ctx, v).Next()
	if !ok {
		return "", fmt.Errorf("%w: the jq program has no result", errUnplaced)
	}
	switch r := r.(type) {
	case error:
		return "", jq.RunError(r)
	case string:
		if !topic.Valid(r) {
			return "", fmt.Errorf("%w: the jq program's result %q is not %s", errUnplaced, r, topic.Form)
		}
		return r, nil
	default:
		return "", fmt.Errorf("%w: the jq program's result is %s, not a string", errUnplaced, jqType(r))
	}
}

// jqType names a jq value's type the way jq's type function does.
func jqType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "a number"
}

// Touches returns the value for routing by EXPR, which reads it, and no
// part for routing by HEADER: schema-encoded values then pass through
// undecoded.
func (t *Transform) Touches() transform.Parts {
	if t.prog == nil {
		return 0
	}
	return transform.PartValue
}
