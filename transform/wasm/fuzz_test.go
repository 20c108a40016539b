package wasm

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// FuzzWasmUppercase sends random keys, values and headers through the
// uppercase example across the ABI: the value comes back upper-cased, the
// key and headers unchanged.
func FuzzWasmUppercase(f *testing.F) {
	f.Add([]byte("k"), []byte("hello"), "h", []byte("v"))
	f.Add([]byte(nil), []byte(nil), "", []byte(nil))
	f.Add([]byte{0, 0xff}, bytes.Repeat([]byte("ab\x00"), 300), "\x00", []byte{0xc3, 0xa9})
	tr := newTest(f, uppercase)
	f.Fuzz(func(t *testing.T, key, value []byte, hk string, hv []byte) {
		r := &kgo.Record{Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: hk, Value: hv}}}
		out, err := tr.Process(context.Background(), transform.Source{Topic: "in", Partition: 1, Offset: 2}, r, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("%v, %d outputs", err, len(out))
		}
		o := out[0]
		if !bytes.Equal(o.Value, bytes.ToUpper(value)) || !bytes.Equal(o.Key, key) {
			t.Fatalf("value %q key %q, want %q %q", o.Value, o.Key, bytes.ToUpper(value), key)
		}
		if len(o.Headers) != 1 || o.Headers[0].Key != hk || !bytes.Equal(o.Headers[0].Value, hv) {
			t.Fatalf("headers %v", o.Headers)
		}
	})
}
