package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// kafkaTxn ends a batch as a Kafka transaction: franz-go's
// GroupTransactSession produces the outputs and commits the consumed
// offsets in one transaction, and on a rebalance or an offset commit it
// cannot make sure of, aborts it and rewinds to the committed offsets.
type kafkaTxn struct {
	producer
	gts        *kgo.GroupTransactSession
	txnID      string
	txnTimeout time.Duration
}

func (k *kafkaTxn) open(kopts []kgo.Opt) (*kgo.Client, error) {
	kopts = append(kopts, kgo.TransactionalID(k.txnID), kgo.TransactionTimeout(k.txnTimeout))
	gts, err := kgo.NewGroupTransactSession(kopts...)
	if err != nil {
		return nil, fmt.Errorf("creating the Kafka client: %w", err)
	}
	k.gts, k.cl = gts, gts.Client()
	return k.cl, nil
}

// hello checks the transaction timeout against the brokers' limit, then
// asks for a producer ID.
func (k *kafkaTxn) hello(ctx context.Context) error {
	denied, err := k.lim.checkTimeout(ctx, k.txnTimeout)
	if err != nil {
		return err
	}
	if err := k.producer.hello(ctx); err != nil {
		return err
	}
	k.lim.warnUnchecked(denied)
	return nil
}

func (k *kafkaTxn) poll(ctx context.Context, max int) kgo.Fetches { return k.gts.PollRecords(ctx, max) }

func (k *kafkaTxn) begin() error { return k.gts.Begin() }

func (k *kafkaTxn) produce(ctx context.Context, r *kgo.Record, _ record.Source, _ *DeadLetter) {
	k.gts.Produce(ctx, r, k.promise)
}

// end flushes before a commit (and before an injected abort, which lets
// its records reach the log, the hardest case for readers), then ends the
// transaction.
func (k *kafkaTxn) end(ctx context.Context, abort Reason, begun time.Time) (bool, Reason, string, error) {
	var detail string
	if abort == "" || abort == ReasonInjected {
		abort, detail = k.flushed(ctx, abort, begun)
	}
	committed, err := k.gts.End(ctx, kgo.TransactionEndTry(abort == ""))
	return committed, abort, detail, err
}

func (k *kafkaTxn) close() { k.gts.Close() }
