package sample

import (
	"encoding/json"
	"testing"
)

// Orders are valid JSON of the requested size, keyed by customer, the
// customer in the key and the value agreeing.
func TestOrder(t *testing.T) {
	for _, size := range []int{0, 100, 1024} {
		r := Order(1234, 10, size)
		var v struct {
			Customer string `json:"customer"`
			Seq      int64  `json:"seq"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("size %d: %v: %s", size, err, r.Value)
		}
		if string(r.Key) != "customer-4" || v.Customer != "customer-4" || v.Seq != 1234 {
			t.Errorf("size %d: key %q, value %+v", size, r.Key, v)
		}
		if size > 96 && len(r.Value) != size {
			t.Errorf("size %d: value of %d bytes", size, len(r.Value))
		}
	}
}
