package txn

import (
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/sink"
)

// Options configure a Session.
type Options struct {
	Brokers            []string
	Group              string
	Topics             []string
	TransactionalID    string
	InstanceID         string // static membership when set
	SessionTimeout     time.Duration
	TransactionTimeout time.Duration
	// FenceWindow: being fenced twice within it is fatal. Default 10m.
	FenceWindow time.Duration
	Logger      *slog.Logger
	Metrics     *Metrics
	// ClientOpts are appended to the options of the group client, e.g.
	// kprom hooks.
	ClientOpts []kgo.Opt
	// ConnOpts say how to reach the brokers: TLS (kgo.DialTLSConfig) and
	// SASL (kgo.SASL), for instance. Unlike ClientOpts they apply to every
	// client the session makes: the group client, each time it is
	// rebuilt, and the admin client. When the brokers and the client do
	// not accept each other (credentials, certificates), Init returns an
	// *AccessError instead of retrying.
	ConnOpts []kgo.Opt
	// Guarantee is how batches end: ExactlyOnce (the zero value) in a
	// Kafka transaction, or in the Destination's own; AtLeastOnce without
	// transactions: End waits until the batch's outputs are acknowledged,
	// then commits the consumed offsets; an aborted batch rewinds and is
	// processed again, so outputs may be written twice but none is lost
	// (TransactionalID is not used).
	Guarantee Guarantee
	// OutputTopics are the topics the session produces to that are known
	// before it starts: the output topic, the dead-letter topic and the
	// chain's fixed destinations. Init reads their max.message.bytes, and
	// the producer's limit on a record batch to each follows it (franz-go
	// would otherwise refuse anything over 1,000,012 bytes, below Kafka's
	// default of 1,048,588). Topics routed to that are not listed get the
	// broker's message.max.bytes. See MaxRecordBytes.
	OutputTopics []string
	// Destination, when not nil, takes the outputs instead of Kafka: each
	// batch's rows, dead letters and next offsets in one transaction of
	// its own, its offsets winning over the group's (see stored.go). It
	// gives ExactlyOnce only. TransactionalID is not used.
	Destination sink.Transactional
	// DestinationName is what Sink reports for Destination, e.g.
	// "postgres"; "kafka" without one.
	DestinationName string
	// MaxCrashAttempts is how many processes may die between polling a
	// partition's records and committing any of them before its records
	// run one per transaction, and the one a process dies on then is
	// handed to the pipeline as a Culprit (see crashes.go). The count
	// lives in the committed offsets' metadata, so it survives SIGKILL and
	// rebalances. 0 keeps no count. Without a Destination only (whose
	// offsets are stored in it, not in the group).
	MaxCrashAttempts int
	// ClientID is the client.id of every client the session makes (the
	// group client, each time it is rebuilt, and the admin client), which
	// broker quotas and logs key on. Default "processor".
	ClientID string
	// StopAt, when set, bounds what the session reads of the partitions
	// it names (topic, partition, offset): Poll never returns a record at
	// or past the partition's offset. Once it has met one, everything
	// before the offset has been polled: it stops fetching the
	// partition and moves its next offset to StopAt's, so that the
	// transaction commits exactly that and a later reader resumes there
	// (`processor replay` stops at the end it captured at start). An
	// abort fetches from the committed offset again.
	StopAt map[string]map[int32]int64
	// StartOffset is where the group starts reading a partition it has no
	// committed offset for (nor, with a Destination, a stored one). nil:
	// the partition's start (kgo.NewOffset().AtStart()).
	StartOffset *kgo.Offset
	// MaxBatchBytes, when above 0, caps the producer's record batches,
	// and so the largest record it sends (MaxRecordBytes), below each
	// topic's max.message.bytes, which still applies when lower. Between
	// 512 bytes and 1GiB (franz-go's bounds).
	MaxBatchBytes int32
}
