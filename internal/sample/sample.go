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
