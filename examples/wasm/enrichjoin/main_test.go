package main

import (
	"testing"

	"github.com/streamproc/processor/transform/wasm/guest"
)

// The plugin's logic, natively: the table is the SDK's in-memory one.
func TestEnrich(t *testing.T) {
	guest.SetTableRow(Table, []byte("c1"), []byte(`{"name":"Ann"}`))
	for _, c := range []struct{ key, in, want string }{
		{"c1", `{"order":7,"customer":"c1"}`, `{"order":7,"customer":"c1","row":{"name":"Ann"}}`},
		{"c2", `{"order":8} `, `{"order":8,"row":null}`},
		{"c1", `{}`, `{"row":{"name":"Ann"}}`},
	} {
		out, err := Enrich(guest.Record{Key: []byte(c.key), Value: []byte(c.in)})
		if err != nil || len(out) != 1 || string(out[0].Value) != c.want {
			t.Errorf("%s %s: %v %v, want %s", c.key, c.in, out, err, c.want)
		}
	}
	guest.SetTableRow(Table, []byte("c1"), nil)
	if out, err := Enrich(guest.Record{Key: []byte("c1"), Value: []byte(`{"a":1}`)}); err != nil || string(out[0].Value) != `{"a":1,"row":null}` {
		t.Errorf("after a tombstone: %v %v", out, err)
	}
	for _, bad := range []string{``, `[1]`, `"x"`, `{`} {
		if _, err := Enrich(guest.Record{Value: []byte(bad)}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
