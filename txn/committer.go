package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
)

// Guarantee is what the session promises about each input record's
// outputs.
type Guarantee string

// The guarantees.
const (
	// ExactlyOnce: every input's outputs are written once, with the
	// consumed offsets in one transaction (Kafka's, or the destination's).
	// The zero Guarantee means it.
	ExactlyOnce Guarantee = "exactly_once"
	// AtLeastOnce: outputs are produced without a transaction and the
	// offsets committed once they are acknowledged; after a failure a
	// batch is written again, so an output may be written twice but none
	// is lost. Kafka only.
	AtLeastOnce Guarantee = "at_least_once"
)

// committer is one way a batch ends: a Kafka transaction (kafkaTxn), a
// flush and then an offset commit (flushCommit), or the destination's own
// transaction holding the offsets too (stored). The session picks one at
// construction and hands it every step of a batch; it keeps the group
// consumer's part itself.
type committer interface {
	// open creates the group client from the session's options, adding
	// the committer's own.
	open(kopts []kgo.Opt) (*kgo.Client, error)
	// hello is Init's first request, which reaches the brokers (and
	// authenticates); prepare runs once access is checked, before Init
	// says the session is ready.
	hello(ctx context.Context) error
	prepare(ctx context.Context) error
	poll(ctx context.Context, max int) kgo.Fetches
	begin() error
	// produce buffers an output of src in the open batch; why is set for
	// a dead letter.
	produce(ctx context.Context, r *kgo.Record, src record.Source, why *DeadLetter)
	// end commits the open batch (abort empty) or aborts it. It returns
	// whether it committed; the abort reason when the committer decides
	// it, and why; and an error when the outcome is unknown (the session
	// is rebuilt) or, a *sink.PersistentError, when no retry can help.
	end(ctx context.Context, abort Reason, begun time.Time) (committed bool, decided Reason, detail string, err error)
	// forget drops the per-partition state of partitions the member no
	// longer holds (revoked; nil: all of them).
	forget(revoked map[string][]int32)
	// committed returns the next offsets committed, per topic and
	// partition, for CommittedOffsets.
	committed() map[string]map[int32]int64
	// maxRecordBytes is MaxRecordBytes; commitFailing is CommitFailing.
	maxRecordBytes(topic string) int
	commitFailing() (since time.Time, transient bool, why string)
	close()
}

// newCommitter picks how the session's batches end, from o.
func newCommitter(o Options, out *outcomes, lim *limiter) (committer, error) {
	if o.Destination != nil {
		if o.Guarantee != ExactlyOnce {
			return nil, fmt.Errorf("txn: a destination that stores offsets gives %s, not %s", ExactlyOnce, o.Guarantee)
		}
		return newStored(o.Destination, out, o.Logger, o.Metrics), nil
	}
	switch o.Guarantee {
	case ExactlyOnce:
		return &kafkaTxn{producer: producer{out: out, promise: out.failed, lim: lim, log: o.Logger, timeout: o.TransactionTimeout},
			txnID: o.TransactionalID, txnTimeout: o.TransactionTimeout}, nil
	case AtLeastOnce:
		return &flushCommit{producer: producer{out: out, promise: out.failed, lim: lim, log: o.Logger, timeout: o.TransactionTimeout}}, nil
	}
	return nil, fmt.Errorf("txn: unknown guarantee %q", o.Guarantee)
}
