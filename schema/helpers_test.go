package schema_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/schematest"
)

// codecs registers text of format f under subject "t-value" and returns
// the registry, an Encoder and a Decoder for it.
func codecs(t testing.TB, f schema.Format, text string, refs ...schema.Reference) (*schematest.Memory, *schema.Encoder, *schema.Decoder) {
	t.Helper()
	reg := schematest.NewMemory()
	sub := reg.MustRegister("t-value", schema.Schema{Type: f, Text: text, References: refs})
	enc, err := schema.NewEncoder(context.Background(), reg, sub, schema.EncoderOptions{})
	if err != nil {
		t.Fatalf("NewEncoder: %v", err)
	}
	return reg, enc, schema.NewDecoder(reg, f, schema.DecoderOptions{})
}

// mustEncode encodes js or fails the test.
func mustEncode(t testing.TB, enc *schema.Encoder, js string) []byte {
	t.Helper()
	b, err := enc.Encode(nil, []byte(js))
	if err != nil {
		t.Fatalf("Encode(%s): %v", js, err)
	}
	return b
}

// mustDecode decodes b or fails the test.
func mustDecode(t testing.TB, dec *schema.Decoder, b []byte) string {
	t.Helper()
	out, err := dec.Decode(context.Background(), b, nil)
	if err != nil {
		t.Fatalf("Decode(%x): %v", b, err)
	}
	return string(out)
}

// sameJSON fails unless got and want are the same JSON value (numbers
// compared by their text).
func sameJSON(t testing.TB, got, want string) {
	t.Helper()
	if canon(t, got) != canon(t, want) {
		t.Errorf("JSON differs:\n got %s\nwant %s", got, want)
	}
}

// canon re-serialises js with sorted keys and numbers as written.
func canon(t testing.TB, js string) string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(js))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %s: %v", js, err)
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// wantFault fails unless err is an *schema.Error of fault f whose
// message contains every one of parts.
func wantFault(t testing.TB, err error, f schema.Fault, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want fault %s", f)
	}
	if got := schema.FaultOf(err); got != f {
		t.Fatalf("fault %q, want %q: %v", got, f, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}
