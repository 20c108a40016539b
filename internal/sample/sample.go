// Package sample makes the sample order events that cmd/loadgen writes and
// the benchmark (bench/run) pre-loads, so that both feed the processor the
// same records.
package sample

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Order returns the n-th sample order: keyed by one of keys customers,
// with a JSON value padded to at least size bytes.
func Order(n int64, keys, size int) *kgo.Record {
	cust := n % int64(keys)
	key := strconv.AppendInt([]byte("customer-"), cust, 10)
	v := make([]byte, 0, max(size, 96))
	v = append(v, `{"order_id":"o-`...)
	v = strconv.AppendInt(v, n, 10)
	v = append(v, `","customer":"customer-`...)
	v = strconv.AppendInt(v, cust, 10)
	v = append(v, `","amount_cents":`...)
	v = strconv.AppendInt(v, 100+(n*7919)%90000, 10)
	v = append(v, `,"seq":`...)
	v = strconv.AppendInt(v, n, 10)
	if pad := size - len(v) - len(`,"pad":""}`); pad > 0 {
		v = append(v, `,"pad":"`...)
		for range pad {
			v = append(v, 'x')
		}
		v = append(v, '"')
	}
	v = append(v, '}')
	return &kgo.Record{Key: key, Value: v}
}

// JQChain is the CPU-bound jq program of the benchmark's jq rows, made
// for Order's values: it derives five fields (arithmetic, a conditional,
// string functions, a join) and drops the padding; one output per order.
const JQChain = `.amount = (.amount_cents / 100)` +
	` | .tier = (if .amount_cents >= 50000 then "gold" elif .amount_cents >= 10000 then "silver" else "bronze" end)` +
	` | .customer_no = (.customer | ltrimstr("customer-") | tonumber)` +
	` | .ref = ([.order_id, .customer, (.seq | tostring)] | join(":") | ascii_upcase)` +
	` | .pad_len = ((.pad // "") | length)` +
	` | del(.pad)`
