package sample

import "strconv"

// OrderSchema is the Avro schema of the orders that AvroOrder makes and
// `loadgen -format avro` writes: examples/avro/order.avsc, version 1 of
// the example's order (integration/schemas/avro_example_test.go checks that the
// two agree).
const OrderSchema = `{
  "type": "record",
  "name": "Order",
  "namespace": "shop",
  "doc": "An order as the shop writes it (version 1).",
  "fields": [
    {"name": "id", "type": "string", "doc": "o-<n>"},
    {"name": "customer", "type": "string", "doc": "customer-<k>; also the record key"},
    {"name": "amount_cents", "type": "long", "doc": "the sum of the items' quantity times unit price"},
    {"name": "currency", "type": "string", "doc": "ISO 4217 code"},
    {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "items", "type": {"type": "array", "items": {
      "type": "record",
      "name": "Item",
      "fields": [
        {"name": "sku", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "unit_price_cents", "type": "long"}
      ]
    }}}
  ]
}
`

// currencies are the orders' currencies, in turn.
var currencies = []string{"EUR", "USD", "GBP"}

// AvroOrder returns the n-th order of OrderSchema as plain JSON (the form
// schema.Encoder encodes), keyed by one of keys customers, created at
// createdMillis (milliseconds since the Unix epoch). It has one to three
// items, and its amount_cents is their sum.
func AvroOrder(n int64, keys int, createdMillis int64) (key, value []byte) {
	cust := n % int64(keys)
	key = strconv.AppendInt([]byte("customer-"), cust, 10)
	v := make([]byte, 0, 320)
	v = append(v, `{"id":"o-`...)
	v = strconv.AppendInt(v, n, 10)
	v = append(v, `","customer":"`...)
	v = append(v, key...)
	items := 1 + n%3
	var amount int64
	for i := range items {
		amount += (1 + (n+i)%4) * (100 + ((n+i)*7919)%9000)
	}
	v = append(v, `","amount_cents":`...)
	v = strconv.AppendInt(v, amount, 10)
	v = append(v, `,"currency":"`...)
	v = append(v, currencies[n%int64(len(currencies))]...)
	v = append(v, `","created_at":`...)
	v = strconv.AppendInt(v, createdMillis, 10)
	v = append(v, `,"items":[`...)
	for i := range items {
		if i > 0 {
			v = append(v, ',')
		}
		v = append(v, `{"sku":"sku-`...)
		v = strconv.AppendInt(v, ((n+i)*31)%500, 10)
		v = append(v, `","quantity":`...)
		v = strconv.AppendInt(v, 1+(n+i)%4, 10)
		v = append(v, `,"unit_price_cents":`...)
		v = strconv.AppendInt(v, 100+((n+i)*7919)%9000, 10)
		v = append(v, '}')
	}
	v = append(v, "]}"...)
	return key, v
}
