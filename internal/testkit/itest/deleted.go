package itest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopic deletes topic, failing the test with the broker's answer.
func (tg *Target) DeleteTopic(t testing.TB, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tg.Admin(t).DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting %s: %v", topic, err)
	}
}

// DenyProduce makes the fake brokers refuse every write to topic with
// TOPIC_AUTHORIZATION_FAILED, as a broker does once its WRITE ACL is gone.
func (tg *Target) DenyProduce(t testing.TB, topic string) {
	t.Helper()
	tg.RefuseProduce(t, topic, kerr.TopicAuthorizationFailed.Code)
}

// RefuseProduce makes the fake brokers answer every write to topic (by
// name or by topic ID) with the error code, until lift is called.
func (tg *Target) RefuseProduce(t testing.TB, topic string, code int16) (lift func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details, err := tg.Admin(t).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := details[topic].ID
	var lifted atomic.Bool
	tg.Fake.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		tg.Fake.KeepControl()
		if lifted.Load() {
			return nil, nil, false
		}
		req := kr.(*kmsg.ProduceRequest)
		hit := false
		for _, rt := range req.Topics {
			hit = hit || rt.Topic == topic || rt.TopicID == id
		}
		if !hit {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return func() { lifted.Store(true) }
}
