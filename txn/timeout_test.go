package txn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/record"
)

// A transaction timeout longer than the brokers' transaction.max.timeout.ms
// is refused by Init at once, naming both, before a producer ID is asked
// for; a timeout equal to it is accepted.
func TestInitChecksTransactionMaxTimeout(t *testing.T) {
	t.Parallel()
	c := newClusterOf(t, kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "5000"}))
	c.createTopic(t, "in", 1)
	ids := c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Observe: true, Count: -1})

	f := c.session(t, "g-long", "tx-long", []string{"in"}, func(o *Options) { o.TransactionTimeout = 5001 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := f.Init(ctx)
	var te *TimeoutError
	if !errors.As(err, &te) || te.Timeout != 5001*time.Millisecond || te.Max != 5*time.Second {
		t.Fatalf("Init = %v, want a *TimeoutError of 5.001s against 5s", err)
	}
	if n := ids.Hits(); n != 0 {
		t.Errorf("%d InitProducerID requests before the refusal, want none", n)
	}
	if f.log.count("retrying") != 0 {
		t.Errorf("the refusal was retried:\n%s", f.log)
	}

	g := c.session(t, "g-max", "tx-max", []string{"in"}, func(o *Options) { o.TransactionTimeout = 5 * time.Second })
	g.init(t)
	if n := ids.Hits(); n == 0 {
		t.Error("no InitProducerID for a timeout at the limit")
	}
}

// Brokers that may not be described (no DescribeConfigs ACL) leave the
// check to the producer ID request: within the limit Init succeeds with a
// warning; beyond it, it fails as the broker answers, without the warning.
func TestInitTimeoutCheckDenied(t *testing.T) {
	t.Parallel()
	c := newClusterOf(t, kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "5000"}))
	c.createTopic(t, "in", 1)
	c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeConfigs}, Err: kerr.ClusterAuthorizationFailed, Count: -1})

	ok := c.session(t, "g-ok", "tx-ok", []string{"in"}, func(o *Options) { o.TransactionTimeout = 4 * time.Second })
	ok.init(t)
	if n := ok.log.count("level=WARN", "transaction.max.timeout.ms"); n != 1 {
		t.Errorf("%d warnings that the limit cannot be read, want 1:\n%s", n, ok.log)
	}

	long := c.session(t, "g-long", "tx-long", []string{"in"}, nil) // 8s
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := long.Init(ctx); !errors.Is(err, kerr.InvalidTransactionTimeout) {
		t.Fatalf("Init = %v, want the broker's INVALID_TRANSACTION_TIMEOUT", err)
	}
	if n := long.log.count("level=WARN", "transaction.max.timeout.ms"); n != 0 {
		t.Errorf("a producer the brokers refused warned %d times of the unread limit, want only the refusal:\n%s", n, long.log)
	}
}

// Options.MaxBatchBytes caps the producer's batches below each topic's
// max.message.bytes, which still applies when lower: MaxRecordBytes says
// so per topic, and a record over the cap fails with MESSAGE_TOO_LARGE
// while one under it commits.
func TestMaxBatchBytes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	if err := c.fake.CreateTopic("small", 1, map[string]string{"max.message.bytes": "2048"}); err != nil {
		t.Fatal(err)
	}
	c.createTopic(t, "out", 1)
	c.produce(t, "in", 1)
	f := c.session(t, "g-cap", "tx-cap", []string{"in"}, func(o *Options) {
		o.MaxBatchBytes = 8192
		o.OutputTopics = []string{"small", "out"}
	})
	f.init(t)
	for topic, want := range map[string]int{"small": 2048, "out": 8192, "routed": 8192} {
		if got := f.MaxRecordBytes(topic); got != want {
			t.Errorf("MaxRecordBytes(%q) = %d, want %d", topic, got, want)
		}
	}
	if n := f.log.count("level=INFO", "topic=small", "max_message_bytes=2048", "batch_max_bytes=8192"); n != 1 {
		t.Errorf("%d lines saying small keeps its own limit, want 1:\n%s", n, f.log)
	}

	in := f.pollN(t, 1)
	f.begin(t)
	big := &kgo.Record{Topic: "out", Value: make([]byte, 8192)}
	f.Produce(context.Background(), big, record.Source{})
	if f.end(t, len(in), "") {
		t.Fatal("a transaction with a record over the batch limit committed")
	}
	if fails := f.TakeFailures(); len(fails) != 1 || fails[0].Record != big || !errors.Is(fails[0].Err, kerr.MessageTooLarge) {
		t.Fatalf("TakeFailures = %+v, want the record over the cap with MESSAGE_TOO_LARGE", fails)
	}
	in = f.pollN(t, 1)
	f.begin(t)
	f.Produce(context.Background(), &kgo.Record{Topic: "out", Value: make([]byte, 8000)}, record.Source{})
	if !f.end(t, len(in), "") {
		t.Fatalf("a record under the cap did not commit: %+v", f.TakeFailures())
	}
}
