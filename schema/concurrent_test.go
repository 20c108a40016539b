package schema_test

import (
	"context"
	"sync"
	"testing"

	"github.com/streamproc/processor/schema"
)

// TestConcurrentUse encodes and decodes with one Encoder and one Decoder
// per format from many goroutines (run it with -race).
func TestConcurrentUse(t *testing.T) {
	for _, c := range []struct {
		f          schema.Format
		text, json string
	}{
		{schema.Avro, orderSchema, orderJSON},
		{schema.Protobuf, benchProto, benchProtoJSON},
		{schema.JSONSchema, benchJSONSchema, benchAvroJSON},
	} {
		t.Run(string(c.f), func(t *testing.T) {
			_, enc, dec := codecs(t, c.f, c.text)
			want := canon(t, mustDecode(t, dec, mustEncode(t, enc, c.json)))
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var buf, out []byte
					for i := 0; i < 50; i++ {
						var err error
						if buf, err = enc.Encode(buf[:0], []byte(c.json)); err != nil {
							t.Error(err)
							return
						}
						if out, err = dec.Decode(context.Background(), buf, out[:0]); err != nil {
							t.Error(err)
							return
						}
						if canon(t, string(out)) != want {
							t.Errorf("goroutine decoded %s", out)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
