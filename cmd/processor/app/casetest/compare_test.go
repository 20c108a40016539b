package casetest

import "testing"

// JSON values compare by value: key order, spacing and the way a number
// is written do not count, anything else does; exact compares bytes, and
// values that are not JSON compare as bytes.
func TestSameBytes(t *testing.T) {
	cases := []struct {
		a, b  string
		exact bool
		want  bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2.0], "a": 1e0 }`, false, true},
		{`{"a":1}`, `{"a":1,"b":null}`, false, false},
		{`[1,2]`, `[2,1]`, false, false},
		{`{"a":100}`, `{"a":1e2}`, false, true},
		{`{"a":0.1}`, `{"a":0.10000000000000001}`, false, false}, // by value, not as float64
		{`{"a":"1"}`, `{"a":1}`, false, false},
		{`{"a":1}`, `{"a": 1}`, true, false},
		{`{"a":1}`, `{"a":1}`, true, true},
		{`text`, `text`, false, true},
		{`text`, `text `, false, false},
		{`true`, `true`, false, true},
	}
	for _, c := range cases {
		if got := sameBytes([]byte(c.a), []byte(c.b), c.exact); got != c.want {
			t.Errorf("sameBytes(%s, %s, exact %v) = %v, want %v", c.a, c.b, c.exact, got, c.want)
		}
	}
	if sameBytes(nil, []byte{}, false) || !sameBytes(nil, nil, false) {
		t.Error("null is not an empty value")
	}
}
