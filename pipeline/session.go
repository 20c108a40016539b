package pipeline

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// Session is what the loop needs of the session it runs on: its consumer
// group's records, the transaction they are processed in, and the outputs
// buffered in it. *txn.Session implements it for every guarantee and
// destination; tests run the loop on a session in memory. The loop calls
// every method but MissingTopics from its own goroutine only.
type Session interface {
	// Init connects (the transactional producer, the group), retrying
	// until it succeeds or ctx ends; its error is fatal.
	Init(ctx context.Context) error
	// Poll returns up to max records, waiting until some arrive or ctx
	// ends.
	Poll(ctx context.Context, max int) kgo.Fetches
	// Begin opens a transaction; txn.ErrRebuilt says the records polled
	// before it are to be dropped (they are fetched again), any other
	// error is fatal.
	Begin(ctx context.Context) error
	// InTxn reports whether a transaction is open, and Begun when it
	// began.
	InTxn() bool
	Begun() time.Time
	// Produce and ProduceDeadLetter buffer an output, or the dead letter
	// of input src, in the open transaction; one that fails makes End
	// abort, and TakeFailures names it.
	Produce(ctx context.Context, r *kgo.Record, src record.Source)
	ProduceDeadLetter(ctx context.Context, r *kgo.Record, src record.Source, why txn.DeadLetter)
	// TakeFailures returns the outputs that failed to produce since the
	// last call, and forgets them.
	TakeFailures() []txn.Failure
	// End commits the open transaction, or aborts it with the reason
	// abort; an abort rewinds to the committed offsets. It returns
	// whether it committed; its error is fatal.
	End(ctx context.Context, records int, abort txn.Reason) (bool, error)
	// MaxRecordBytes is the largest record the producer sends to topic
	// (0 when not known).
	MaxRecordBytes(topic string) int
	// MissingTopics returns which of topics the cluster does not have, or
	// an error when it cannot say.
	MissingTopics(ctx context.Context, topics []string) ([]string, error)
	// AssignmentEpoch changes whenever the assignment may have changed.
	AssignmentEpoch() uint64
	// Close leaves the group and closes the clients; Run calls it when it
	// returns.
	Close()
}

// Observer is the read-only view of the session that status, health and
// lag need: safe from any goroutine, and never on the per-record path.
// *txn.Session implements it.
type Observer interface {
	// Ready reports whether the session has joined its group and is
	// ready to produce; Connecting whether it still waits for the
	// brokers.
	Ready() bool
	Connecting() bool
	// Metrics are the transaction metrics: aborts by reason and the last
	// one, when the open transaction began, the last commit.
	Metrics() *txn.Metrics
	// Assigned and CommittedOffsets are the assigned input partitions
	// and the group's committed offsets for them; EndOffsets reads their
	// end offsets from the cluster.
	Assigned() map[string][]int32
	CommittedOffsets() map[string]map[int32]int64
	EndOffsets(ctx context.Context, topics []string) (map[string]map[int32]txn.Ends, error)
	// Identity, Member, Guarantee and Sink say who the session is and
	// where its outputs go, for /status.
	Identity() (group, transactionalID string)
	Member() (memberID string, generation int32)
	Guarantee() string
	Sink() string
	// CommitFailing reports since when commits into a database have
	// failed (zero when they do not), whether retrying is expected to fix
	// it, and why.
	CommitFailing() (since time.Time, transient bool, why string)
}
