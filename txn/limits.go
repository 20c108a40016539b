package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultMaxMessageBytes is Kafka's default max.message.bytes (and broker
// message.max.bytes): 1 MiB plus the 12 bytes of a batch's log overhead.
// The session assumes it for a topic whose configuration it may not read
// (no DescribeConfigs ACL) when it may not read the broker's either.
const DefaultMaxMessageBytes int32 = 1048588

// franz-go accepts batch limits in [minBatchBytes, maxBatchBytes].
const (
	minBatchBytes = 512
	maxBatchBytes = 1 << 30
)

// limiter holds the producer's per-topic batch limits, which Init reads
// (read) and the group client asks for (batchLimit).
type limiter struct {
	admin   *kadm.Client
	outputs []string // Options.OutputTopics
	log     *slog.Logger
	cap     int32 // Options.MaxBatchBytes; 0: none
	cur     atomic.Pointer[batchLimits]

	timeoutWarned bool // warnUnchecked has warned (Init's goroutine only)
}

// batchLimits are the producer's limits on a record batch, per topic.
type batchLimits struct {
	topics   map[string]int32 // the OutputTopics' max.message.bytes
	fallback int32            // any other topic: the broker's message.max.bytes
}

// batchLimit is the producer's limit on a batch to topic (for
// kgo.ProducerBatchMaxBytesFn). The broker measures a batch against the
// topic's max.message.bytes after compression; franz-go measures it before
// (and sends it uncompressed when compressing makes it larger), so a
// batch within this limit is never too large for the broker.
func (lim *limiter) batchLimit(topic string) int32 {
	l := lim.cur.Load()
	if n, ok := l.topics[topic]; ok {
		return n
	}
	return l.fallback
}

// MaxRecordBytes is the most a record to topic may take encoded in its
// own record batch (batch header included) for the producer to send it:
// the topic's max.message.bytes as Init read it, or the broker's
// message.max.bytes for a topic not in Options.OutputTopics. A larger
// record fails with kerr.MessageTooLarge without reaching the broker. It
// is 0 with a Destination, which has no such limit.
func (s *Session) MaxRecordBytes(topic string) int { return s.c.maxRecordBytes(topic) }

// readLimits reads the max.message.bytes of the OutputTopics and the
// broker's message.max.bytes, for the producer's batch limits. A
// configuration the principal may not describe (no DescribeConfigs ACL)
// falls back, with a warning: a topic to the broker's value, the broker's
// to DefaultMaxMessageBytes. A topic that does not exist gets the broker's
// value too (the pipeline's topic check reports it). It returns an error
// only when the brokers do not answer, which Init retries.
func (lim *limiter) read(ctx context.Context) error {
	fallback := DefaultMaxMessageBytes
	brokers, err := brokerConfigs(ctx, lim.admin)
	switch {
	case err != nil && !denied(err):
		return fmt.Errorf("reading the broker's message.max.bytes: %w", err)
	case err != nil:
		lim.log.Warn("may not read the broker's configuration (DescribeConfigs on the cluster); assuming Kafka's default message.max.bytes",
			"message_max_bytes", fallback, "err", err.Error())
	default:
		for _, rc := range brokers {
			if n, ok := configInt(rc, "message.max.bytes"); ok && rc.Err == nil {
				fallback = n
				break
			}
			if denied(rc.Err) {
				lim.log.Warn("may not read the broker's configuration (DescribeConfigs on the cluster); assuming Kafka's default message.max.bytes",
					"message_max_bytes", fallback, "err", rc.Err.Error())
			}
		}
	}
	limits := &batchLimits{topics: make(map[string]int32, len(lim.outputs)), fallback: fallback}
	if len(lim.outputs) > 0 {
		topics, err := lim.admin.DescribeTopicConfigs(ctx, lim.outputs...)
		if err != nil && !denied(err) {
			return fmt.Errorf("reading the output topics' max.message.bytes: %w", err)
		}
		for _, rc := range topics {
			n, ok := configInt(rc, "max.message.bytes")
			switch {
			case rc.Err == nil && ok:
				limits.topics[rc.Name] = n
			case denied(rc.Err):
				lim.log.Warn("may not read an output topic's configuration (DescribeConfigs on the topic); assuming the broker's message.max.bytes for it",
					"topic", rc.Name, "max_message_bytes", fallback, "err", rc.Err.Error())
			}
		}
	}
	lim.cur.Store(lim.capped(limits))
	return nil
}

// capped returns l with every limit lowered to the cap, when there is
// one. A topic whose own limit is lower keeps it, which is logged: the
// cap does not raise what the broker takes.
func (lim *limiter) capped(l *batchLimits) *batchLimits {
	if lim.cap <= 0 {
		return l
	}
	c := min(max(lim.cap, minBatchBytes), maxBatchBytes)
	out := &batchLimits{topics: make(map[string]int32, len(l.topics)), fallback: min(l.fallback, c)}
	for t, n := range l.topics {
		out.topics[t] = min(n, c)
		if n < c {
			lim.log.Info("a topic takes smaller record batches than the producer's batch limit; its own limit applies",
				"topic", t, "max_message_bytes", n, "batch_max_bytes", c)
		}
	}
	return out
}

// denied reports whether err refuses describing a configuration.
func denied(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// brokerConfigs describes the configuration of one broker, the first the
// metadata lists: the cluster-wide resource holds only values set
// dynamically, not a broker's static or default ones.
func brokerConfigs(ctx context.Context, admin *kadm.Client) (kadm.ResourceConfigs, error) {
	meta, err := admin.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the brokers' metadata: %w", err)
	}
	if len(meta.Brokers) == 0 {
		return nil, nil
	}
	return admin.DescribeBrokerConfigs(ctx, meta.Brokers[0].NodeID)
}

// configInt returns config key of rc, clamped to what franz-go accepts as a
// batch limit.
func configInt(rc kadm.ResourceConfig, key string) (int32, bool) {
	n, ok := configInt64(rc, key)
	if !ok {
		return 0, false
	}
	return int32(min(max(n, minBatchBytes), maxBatchBytes)), true
}

// configInt64 returns config key of rc, a whole number.
func configInt64(rc kadm.ResourceConfig, key string) (int64, bool) {
	for _, c := range rc.Configs {
		if c.Key != key || c.Value == nil {
			continue
		}
		n, err := strconv.ParseInt(*c.Value, 10, 64)
		return n, err == nil
	}
	return 0, false
}
