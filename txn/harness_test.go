package txn

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// cluster is a kfake cluster for one test (see package kafkatest); fake
// and brokers are the kafkatest.Cluster's, by the names these tests use.
type cluster struct {
	*kafkatest.Cluster
	fake    *kfake.Cluster
	brokers []string
}

// newCluster is a three-broker kfake cluster for one test.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterOf(t, kfake.NumBrokers(3), kfake.ClusterID("txn-test"))
}

// newClusterOf is a kfake cluster of opts for one test.
func newClusterOf(t *testing.T, opts ...kfake.Opt) *cluster {
	t.Helper()
	c := kafkatest.NewFake(t, opts...)
	return &cluster{Cluster: c, fake: c.Fake, brokers: c.Brokers}
}

// createTopic creates topic on the kfake cluster directly.
func (c *cluster) createTopic(t *testing.T, topic string, partitions int32) {
	t.Helper()
	if err := c.fake.CreateTopic(topic, partitions, nil); err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
}

// produce writes n plain (non-transactional) records "v0".."v<n-1>" to topic.
func (c *cluster) produce(t *testing.T, topic string, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	c.ProduceSync(t, rs)
}

// readAll returns the values of the data records of topic up to its
// current end offsets, as a read_committed or a read_uncommitted consumer
// sees them.
func (c *cluster) readAll(t *testing.T, topic string, committed bool) []string {
	t.Helper()
	var out []string
	for _, r := range c.ReadAll(t, topic, committed) {
		out = append(out, string(r.Value))
	}
	return out
}

// endOffsets returns topic's log-end offset per partition.
func (c *cluster) endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	return c.EndOffsets(t, topic)
}

// committedOffsets returns the sum of the group's committed offsets on
// topic, as the kfake cluster holds them.
func (c *cluster) committedOffsets(group, topic string) int64 {
	gi := c.fake.GroupInfo(group)
	if gi == nil {
		return 0
	}
	var n int64
	for _, pc := range gi.Commits[topic] {
		n += pc.Offset
	}
	return n
}
