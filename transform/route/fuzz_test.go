package route

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// FuzzRoute routes records with random values and headers: a record either
// fails or gets a valid topic name other than its input topic.
func FuzzRoute(f *testing.F) {
	f.Add([]byte(`{"region":"eu"}`), []byte("orders-eu"))
	f.Add([]byte(`{"region":"../x"}`), []byte("in"))
	f.Add([]byte{0xff}, []byte(nil))
	var ts []transform.Transform
	for _, s := range []Settings{
		{Expr: `"orders-" + .region`},
		{Expr: `.region`, Default: "orders-unrouted"},
		{Header: "destination"},
		{Header: "destination", Default: "orders-unrouted"},
	} {
		tr, err := New(&s)
		if err != nil {
			f.Fatal(err)
		}
		ts = append(ts, tr)
	}
	valid := func(topic string) bool {
		if topic == "" || topic == "." || topic == ".." || len(topic) > 249 {
			return false
		}
		for _, c := range topic {
			if !(c == '.' || c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
		return true
	}
	f.Fuzz(func(t *testing.T, value, header []byte) {
		for _, tr := range ts {
			r := &kgo.Record{Value: value, Headers: []kgo.RecordHeader{{Key: "destination", Value: header}}}
			out, err := tr.Process(context.Background(), record.Source{Topic: "in"}, r, nil)
			if err != nil {
				continue
			}
			if len(out) != 1 || !valid(out[0].Topic) || out[0].Topic == "in" {
				t.Fatalf("routed to %q (%d outputs)", out[0].Topic, len(out))
			}
		}
	})
}
