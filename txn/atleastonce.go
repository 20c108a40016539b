package txn

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// At least once (Guarantee AtLeastOnce): the same session and loop,
// without transactions. A batch's outputs are produced as it is
// processed; End flushes them, and only once every one is acknowledged
// commits the offsets consumed. An abort, a failed output or a failed
// commit rewinds the consumer to the batch's first offsets, so its input
// is processed again: outputs written before are written twice, none is
// lost. Rebalances wait until the batch has ended (BlockRebalanceOnPoll),
// so a batch never loses its partitions midway.

// flushCommit ends a batch by a flush and then an offset commit.
type flushCommit struct {
	producer
	batch batchStart
}

// batchStart is what the committers without a Kafka transaction keep of
// their group client: per partition, the first offset polled since the
// last commit, where an aborted batch rewinds to; and whether a batch is
// open.
type batchStart struct {
	cl     *kgo.Client
	starts map[string]map[int32]kgo.EpochOffset
	open   bool
}

// plainClient creates a group client that commits only when told
// (DisableAutoCommit), and whose rebalances wait for the batch to end
// (BlockRebalanceOnPoll, AllowRebalance).
func (b *batchStart) plainClient(kopts []kgo.Opt) (*kgo.Client, error) {
	kopts = append(kopts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, errCreating(err)
	}
	b.cl, b.starts, b.open = cl, map[string]map[int32]kgo.EpochOffset{}, false
	return cl, nil
}

// poll polls and notes, per partition, the first offset of the batch. A
// poll that opens no batch lets a waiting rebalance proceed.
func (b *batchStart) poll(ctx context.Context, max int) kgo.Fetches {
	fs := b.cl.PollRecords(ctx, max)
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		parts := b.starts[p.Topic]
		if parts == nil {
			parts = map[int32]kgo.EpochOffset{}
			b.starts[p.Topic] = parts
		}
		if _, ok := parts[p.Partition]; !ok {
			first := p.Records[0]
			parts[p.Partition] = kgo.EpochOffset{Epoch: first.LeaderEpoch, Offset: first.Offset}
		}
	})
	if !b.open && fs.NumRecords() == 0 {
		b.cl.AllowRebalance()
	}
	return fs
}

// rewind sets the consumer back to the batch's first offsets.
func (b *batchStart) rewind() {
	b.cl.SetOffsets(b.starts)
	clear(b.starts)
}

func (b *batchStart) begin() error {
	b.open = true
	return nil
}

func (a *flushCommit) open(kopts []kgo.Opt) (*kgo.Client, error) {
	cl, err := a.batch.plainClient(kopts)
	a.cl = cl
	return cl, err
}

func (a *flushCommit) poll(ctx context.Context, max int) kgo.Fetches { return a.batch.poll(ctx, max) }

func (a *flushCommit) begin() error { return a.batch.begin() }

func (a *flushCommit) produce(ctx context.Context, r *kgo.Record, _ record.Source, _ *DeadLetter) {
	a.producer.produce(ctx, r)
}

// end flushes the batch's outputs, then commits the consumed offsets
// unless abort is set or an output failed, and otherwise rewinds.
func (a *flushCommit) end(ctx context.Context, abort Reason, begun time.Time) (bool, Reason, string, error) {
	defer a.cl.AllowRebalance()
	a.batch.open = false
	abort, detail := a.flushed(ctx, abort, begun)
	if abort == "" && a.out.first() == nil {
		err := a.cl.CommitUncommittedOffsets(ctx)
		if err == nil {
			clear(a.batch.starts)
			return true, "", "", nil
		}
		detail = "committing the consumed offsets: " + err.Error()
	}
	a.batch.rewind()
	return false, abort, detail, nil
}

func (a *flushCommit) close() { a.cl.Close() }
