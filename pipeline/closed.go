package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// Entries that emit when they close (transform.WindowEmitter, aggregate
// with EMIT=close): expireState deletes them by stream time like every
// expired entry, and hands each to the chain (transform.Chain.Closed)
// inside the same transaction, whose records it produces like a record's
// outputs, with the lineage of the input the stage names: the original
// input, also behind a repartition hop, where the store's partitions are
// the repartition topic's (transform.OriginOf). A committed
// transaction has deleted the entry and written its records; an aborted
// one neither, and its records are processed again from the committed
// stream time, which closes the entry again. So each entry emits exactly
// once, whatever the batching, the aborts, the crashes and the
// rebalances. A bound on the transaction's bytes stops the deletions
// with entries left (expireState), which the next poll deletes and
// emits first: it delays a close, never loses one. The records count
// toward the transaction's bytes: an emitting store's deletions are
// bounded to a quarter of what is left, for room for them.

// expireStore deletes the entries of a store's partition that expired
// by now (Unix milliseconds), within room bytes of tombstone keys (a
// quarter of it for a store that emits on close), and emits those of a
// store that emits on close. It returns their tombstones' key bytes and
// the bound it kept them within: bytes below it mean none are left.
func (p *Pipeline) expireStore(ctx context.Context, store, topic string, partition int32, now int64, room int) (bytes, limit int, err error) {
	w := &p.pool.workers[p.pool.solo]
	chain := w.chain
	if w.after != nil && p.fromHop(topic) {
		chain = w.after // the stores behind the hop, partitioned like its topic
	}
	if _, _, ok := chain.Emitter(store); !ok {
		_, bytes, err = p.st.txn.Expire(ctx, store, partition, time.UnixMilli(now), 0, room)
		return bytes, room, err
	}
	if w.stores != nil {
		w.stores.partition, w.stores.stream, w.stores.origin = partition, now, record.Source{}
	}
	limit = max(room/4, 1)
	_, bytes, err = p.st.txn.ExpireEach(ctx, store, partition, time.UnixMilli(now), 0, limit,
		func(key, value []byte, expiry time.Time) error {
			cl := transform.Closing{Store: store, Topic: topic, Partition: partition, Key: key, Value: value, Expiry: expiry}
			out, src, err := chain.Closed(w.ctx, cl, w.out[:0])
			w.out = out[:0]
			if err != nil {
				stage := ""
				if te := (*transform.Error)(nil); errors.As(err, &te) {
					stage = te.Stage
				}
				return p.failed(src, &kgo.Record{Topic: topic, Partition: partition, Key: key, Value: value, Timestamp: expiry}, stage, 1, err, "")
			}
			for _, o := range out {
				p.produceOutput(o, src, src)
			}
			clear(out)
			return nil
		})
	return bytes, limit, err
}
