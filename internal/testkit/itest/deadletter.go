package itest

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// SyncProduce writes recs, waits for every acknowledgement and returns them
// with their partitions and offsets set.
func (tg *Target) SyncProduce(t testing.TB, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	return tg.ProduceSync(t, recs)
}

// Incompressible returns n random bytes: the producer compresses batches,
// and the broker measures the compressed batch against max.message.bytes.
func Incompressible(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// SrcKey names where r was read from the way lineage headers do.
func SrcKey(r *kgo.Record) string {
	return check.Input{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}.String()
}
