package jq

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// FuzzJQ feeds random bytes as key, value and header to jq programs that
// map, filter and fan out: the transform either fails the record with an
// error or returns valid JSON records that keep the key and headers; it
// never panics.
func FuzzJQ(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"amount_cents":100,"items":[1,2]}`), []byte("h"))
	f.Add([]byte(nil), []byte(`not json`), []byte(nil))
	f.Add([]byte{0}, []byte(`[1e400, -0, "\u0000"]`), []byte{0xff})
	var ts []transform.Transform
	for _, expr := range []string{".", ".amount_cents *= 2", "select(.keep)", ".items[]?", "{a: .a, b: (.b // 1)}"} {
		tr, err := New(&Settings{Expr: expr})
		if err != nil {
			f.Fatal(err)
		}
		ts = append(ts, tr)
	}
	f.Fuzz(func(t *testing.T, key, value, header []byte) {
		for _, tr := range ts {
			r := &kgo.Record{Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: "h", Value: header}}}
			out, err := tr.Process(context.Background(), record.Source{Topic: "in"}, r, nil)
			if err != nil {
				if len(out) != 0 {
					t.Fatalf("error %v with %d outputs", err, len(out))
				}
				continue
			}
			for _, o := range out {
				if !json.Valid(o.Value) {
					t.Fatalf("output %q is not JSON", o.Value)
				}
				if string(o.Key) != string(key) || len(o.Headers) != 1 || string(o.Headers[0].Value) != string(header) {
					t.Fatalf("output lost its key or headers: %+v", o)
				}
			}
		}
	})
}
