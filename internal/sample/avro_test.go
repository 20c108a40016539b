package sample

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/schema/schematest"
)

// Avro orders fit OrderSchema, come back from the wire format as the same
// JSON, and add up: amount_cents is the sum over the items.
func TestAvroOrder(t *testing.T) {
	ctx := context.Background()
	reg := schematest.NewMemory()
	sub := reg.MustRegister("orders-value", schema.Schema{Type: schema.Avro, Text: OrderSchema})
	enc, err := schema.NewEncoder(ctx, reg, sub, schema.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dec := schema.NewDecoder(reg, schema.Avro, schema.DecoderOptions{})
	for n := range int64(7) {
		key, js := AvroOrder(n, 5, 1_700_000_000_000+n)
		wire, err := enc.Encode(nil, js)
		if err != nil {
			t.Fatalf("order %d: %v: %s", n, err, js)
		}
		back, err := dec.Decode(ctx, wire, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(back) != string(js) {
			t.Errorf("order %d: decoded %s, want %s", n, back, js)
		}
		var o struct {
			Customer string `json:"customer"`
			Amount   int64  `json:"amount_cents"`
			Items    []struct {
				Quantity int64 `json:"quantity"`
				Price    int64 `json:"unit_price_cents"`
			} `json:"items"`
		}
		if err := json.Unmarshal(js, &o); err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, it := range o.Items {
			sum += it.Quantity * it.Price
		}
		if o.Customer != string(key) || sum != o.Amount || len(o.Items) < 1 || len(o.Items) > 3 {
			t.Errorf("order %d: key %q, %+v", n, key, o)
		}
	}
}
