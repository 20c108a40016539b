package itest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/txn"
)

// ProduceLarge writes recs with a producer that takes batches as large as
// Kafka's default limit, and returns them with their offsets set.
func (tg *Target) ProduceLarge(t testing.TB, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	return tg.ProduceSync(t, recs, kgo.ProducerBatchMaxBytes(txn.DefaultMaxMessageBytes))
}
