package headers

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// FuzzHeaders sets and removes headers on records with random headers: the
// set keys appear once with their values, removed keys never, and every
// other header keeps its value and order.
func FuzzHeaders(f *testing.F) {
	f.Add([]byte("a\x00x\x00debug\x00y\x00source\x00z"))
	f.Add([]byte(nil))
	f.Add([]byte("\x00\x00\x00"))
	tr, err := New(&Settings{Set: "source=eu,schema=v2", Remove: "debug"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var in []kgo.RecordHeader
		var parts [][]byte
		start := 0
		for i := 0; i <= len(raw); i++ {
			if i == len(raw) || raw[i] == 0 {
				parts = append(parts, raw[start:i])
				start = i + 1
			}
		}
		for i := 0; i+1 < len(parts); i += 2 {
			in = append(in, kgo.RecordHeader{Key: string(parts[i]), Value: parts[i+1]})
		}
		r := &kgo.Record{Headers: append([]kgo.RecordHeader(nil), in...)}
		out, err := tr.Process(context.Background(), record.Source{}, r, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("%v, %d outputs", err, len(out))
		}
		var kept []kgo.RecordHeader
		for _, h := range in {
			if h.Key != "debug" && h.Key != "source" && h.Key != "schema" {
				kept = append(kept, h)
			}
		}
		got := out[0].Headers
		if len(got) != len(kept)+2 {
			t.Fatalf("%d headers, want %d kept + 2 set: %v", len(got), len(kept), got)
		}
		for i, h := range kept {
			if got[i].Key != h.Key || string(got[i].Value) != string(h.Value) {
				t.Fatalf("header %d is %q=%q, want %q=%q", i, got[i].Key, got[i].Value, h.Key, h.Value)
			}
		}
		set := map[string]string{}
		for _, h := range got[len(kept):] {
			set[h.Key] = string(h.Value)
		}
		if set["source"] != "eu" || set["schema"] != "v2" {
			t.Fatalf("set headers: %v", set)
		}
	})
}
