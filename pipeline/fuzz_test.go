package pipeline

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/identity"
)

// headersFrom splits raw bytes into headers: a 0 byte ends a key or value.
func headersFrom(raw []byte) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	var cur [][]byte
	start := 0
	for i := 0; i <= len(raw); i++ {
		if i == len(raw) || raw[i] == 0 {
			cur = append(cur, raw[start:i])
			start = i + 1
			if len(cur) == 2 {
				hs = append(hs, kgo.RecordHeader{Key: string(cur[0]), Value: cur[1]})
				cur = cur[:0]
			}
		}
	}
	return hs
}

// FuzzRecordPath runs random keys, values and headers through the record
// path: an identity chain, lineage stamping, and dead-letter headers. The
// key and value pass unchanged, other headers keep their order, and the
// lineage and error headers appear exactly once with the right values.
func FuzzRecordPath(f *testing.F) {
	f.Add([]byte("k"), []byte(`{"a":1}`), []byte("trace\x00abc"), "orders", int32(3), int64(42))
	f.Add([]byte{}, []byte{0xff, 0}, []byte("processor.source.topic\x00x\x00processor.error\x00old"), "t", int32(0), int64(0))
	f.Add([]byte(nil), []byte(nil), []byte(nil), "a.b_c-d", int32(999), int64(1<<62))
	tr := &transform.Registry{}
	tr.Register("identity", transform.Plain("", func() (transform.Transform, error) { return identity.Transform{}, nil }))
	chain, err := tr.Build([]transform.Entry{{Name: "identity"}, {Name: "identity", Alias: "again"}}, nil)
	if err != nil {
		f.Fatal(err)
	}
	l := newLineage(false)
	f.Fuzz(func(t *testing.T, key, value, rawHeaders []byte, topic string, partition int32, offset int64) {
		if partition < 0 || offset < 0 {
			return
		}
		in := headersFrom(rawHeaders)
		r := &kgo.Record{Key: key, Value: value, Headers: in}
		src := record.Source{Topic: topic, Partition: partition, Offset: offset}
		out, err := chain.Process(context.Background(), src, r, nil)
		if err != nil || len(out) != 1 || out[0] != r {
			t.Fatalf("identity chain: %v, %d outputs", err, len(out))
		}
		l.stamp(r, src)
		if string(r.Key) != string(key) || string(r.Value) != string(value) {
			t.Fatal("key or value changed")
		}
		var kept []kgo.RecordHeader
		for _, h := range in {
			if !record.IsLineageHeader(h.Key) {
				kept = append(kept, h)
			}
		}
		if len(r.Headers) != len(kept)+1 {
			t.Fatalf("%d headers, want %d kept + 1 lineage", len(r.Headers), len(kept))
		}
		for i, h := range kept {
			if r.Headers[i].Key != h.Key || string(r.Headers[i].Value) != string(h.Value) {
				t.Fatalf("header %d changed: %q=%q, want %q=%q", i, r.Headers[i].Key, r.Headers[i].Value, h.Key, h.Value)
			}
		}
		want := topic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
		if h := r.Headers[len(kept)]; h.Key != record.HeaderSource || string(h.Value) != want {
			t.Fatalf("lineage %s = %q, want %s = %q", h.Key, h.Value, record.HeaderSource, want)
		}

		dl := deadLetterHeaders(r.Headers, "identity@again", 3, errors.New(string(value)), "")
		counts := map[string]int{}
		for _, h := range dl {
			counts[h.Key]++
		}
		for _, k := range []string{record.HeaderError, record.HeaderErrorTransform, record.HeaderErrorAttempts} {
			if counts[k] != 1 {
				t.Fatalf("dead letter has %s %d times", k, counts[k])
			}
		}
		if len(l.hdrs) > hdrChunk/2 {
			l.reset()
		}
	})
}
