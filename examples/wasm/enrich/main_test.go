package main

import (
	"testing"

	"github.com/streamproc/processor/transform/wasm/guest"
)

// A plugin's function is plain Go: test it natively, no WebAssembly
// needed.
func TestEnrich(t *testing.T) {
	out, err := Enrich(guest.Record{Key: []byte("o-1"), Value: []byte(`{"order_id":"o-1", "items":[{"a":"}"}], "amount_cents":12345,"id":12345678901234567890 }`)})
	if err != nil || len(out) != 1 {
		t.Fatal(out, err)
	}
	if got, want := string(out[0].Value), `{"order_id":"o-1", "items":[{"a":"}"}], "amount_cents":12345,"id":12345678901234567890,"size":"large"}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if h := out[0].Headers; len(h) != 1 || h[0].Key != "order-size" || string(h[0].Value) != "large" {
		t.Errorf("headers: %+v", h)
	}
	out, err = Enrich(guest.Record{Value: []byte(`{"amount_cents":999,"status":"paid"}`)})
	if err != nil || string(out[0].Value) != `{"amount_cents":999,"status":"paid","size":"small"}` {
		t.Errorf("small: %q, %v", out[0].Value, err)
	}
	if out, err := Enrich(guest.Record{Value: []byte(`{"status":"test","amount_cents":1}`)}); err != nil || len(out) != 0 {
		t.Errorf("a test order should be dropped: %v, %v", out, err)
	}
	for _, bad := range []string{`[1]`, `{"amount_cents":"12"}`, `{}`, `nope`, `{"amount_cents":1`, `{"amount_cents":1} x`, `{"a" 1}`, `{"s":"\"}`} {
		if _, err := Enrich(guest.Record{Value: []byte(bad)}); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}
