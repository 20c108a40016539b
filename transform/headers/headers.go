// Package headers registers the "headers" transform, which sets and
// removes record headers: SET="k=v,k2=v2" sets each key to its value
// (replacing every header of that key), and REMOVE="a,b" removes every
// header of those keys.
// Other headers keep their order; set headers follow them, in the order
// written.
//
// Values cannot contain commas. Set values are shared by every record,
// so treat header values as read-only, as franz-go does. The transform
// never modifies a header slice in place (another record may share it):
// it builds each record's new headers in large chunks of memory it hands
// out piece by piece, so a record costs a copy of its headers but,
// amortized, no allocation.
package headers

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

func init() {
	transform.Register("headers", transform.Typed("sets (SET) and removes (REMOVE) record headers", New))
}

// Settings are the headers transform's settings, one set per chain entry.
type Settings struct {
	// Set is "key=value" pairs, comma-separated.
	Set string `setting:"SET" doc:"headers to set on every record, replacing headers of the same key" form:"comma-separated key=value pairs with distinct, non-empty keys, e.g. source=eu,schema=v2 (values cannot contain commas)"`
	// Remove is header keys, comma-separated.
	Remove string `setting:"REMOVE" doc:"header keys to remove from every record" form:"comma-separated header keys, e.g. debug,trace-id"`
}

// Transform rewrites headers. It keeps its chunk of header memory, so like
// every transform it is called from one goroutine at a time.
type Transform struct {
	set   []kgo.RecordHeader // in the order written; values shared by all records
	drop  map[string]bool    // keys removed or replaced
	chunk []kgo.RecordHeader
}

// chunkSize is how many headers one chunk holds.
const chunkSize = 1024

// New parses the settings; at least one must be set. Errors are
// *settings.Error.
func New(s *Settings) (transform.Transform, error) {
	t := &Transform{drop: map[string]bool{}}
	if strings.TrimSpace(s.Set) != "" {
		for item := range strings.SplitSeq(s.Set, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok || k == "" || t.drop[k] {
				return nil, transform.Invalid("SET", s.Set, "")
			}
			t.drop[k] = true
			t.set = append(t.set, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	if strings.TrimSpace(s.Remove) != "" {
		for item := range strings.SplitSeq(s.Remove, ",") {
			k := strings.TrimSpace(item)
			if k == "" {
				return nil, transform.Invalid("REMOVE", s.Remove, "")
			}
			if t.drop[k] {
				for _, h := range t.set {
					if h.Key == k {
						return nil, transform.Invalid("REMOVE", s.Remove, ", and none also in ", settings.Ref("SET"), fmt.Sprintf(" (%q is in both)", k))
					}
				}
			}
			t.drop[k] = true
		}
	}
	if len(t.drop) == 0 {
		return nil, transform.Missing("SET", "; or ", settings.Ref("REMOVE"), " set")
	}
	return t, nil
}

// Process rewrites rec's headers and appends rec.
func (t *Transform) Process(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	keep := 0
	for _, h := range rec.Headers {
		if !t.drop[h.Key] {
			keep++
		}
	}
	if keep == len(rec.Headers) && len(t.set) == 0 {
		return append(out, rec), nil // nothing to remove, nothing to set
	}
	n := keep + len(t.set)
	if n == 0 {
		rec.Headers = nil
		return append(out, rec), nil
	}
	if len(t.chunk)+n > cap(t.chunk) {
		// Records still refer to the old chunk; it is freed once none do.
		t.chunk = make([]kgo.RecordHeader, 0, max(chunkSize, n))
	}
	start := len(t.chunk)
	for _, h := range rec.Headers {
		if !t.drop[h.Key] {
			t.chunk = append(t.chunk, h)
		}
	}
	t.chunk = append(t.chunk, t.set...)
	rec.Headers = t.chunk[start:len(t.chunk):len(t.chunk)]
	return append(out, rec), nil
}

// Touches returns no part: the transform works on headers only, so
// schema-encoded keys and values pass through it undecoded.
func (t *Transform) Touches() transform.Parts { return 0 }
