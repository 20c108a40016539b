package itest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// StampedBase is the record time the windowed tests start from: a whole
// minute two hours ago, so that one-minute windows start on their
// records' minutes, and no broker refuses or deletes the records by their
// timestamps (Apache Kafka refuses timestamps more than an hour ahead by
// default, and deletes segments a week old).
func StampedBase() time.Time { return time.Now().Truncate(time.Minute).Add(-2 * time.Hour) }

// Stamped is a record of topic with the given key, value and timestamp;
// the producer keeps the timestamp (CreateTime, the default of both
// brokers), so that the processor sees the record time a test chose.
func Stamped(topic, key, value string, ts time.Time) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: ts}
}

// ProduceStamped writes recs, idempotently and in order, with the
// timestamps they carry, and reports whether every one was acknowledged
// within ProduceTimeout. It may be called from any goroutine: a failure is
// reported with t.Errorf, unless the test has already ended.
func (tg *Target) ProduceStamped(t testing.TB, recs []*kgo.Record) bool {
	t.Helper()
	cl, err := kgo.NewClient(tg.ClientOpts(kgo.ProducerLinger(2 * time.Millisecond))...)
	if err != nil {
		t.Errorf("a producer of stamped records: %v", err)
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), ProduceTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		if t.Context().Err() == nil {
			t.Errorf("producing %d stamped records: %v", len(recs), err)
		}
		return false
	}
	return true
}
