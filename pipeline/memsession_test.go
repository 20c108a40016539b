package pipeline

// The loop tests of policies, the poison book and the budget need no
// broker: they run on the cluster and session in memory of
// internal/memkafka (the one pipelinetest drives chains with), which
// has the session's semantics as the loop sees them. A loopEnv made by
// newMemEnv runs on it: the same checks, in milliseconds.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline/internal/memkafka"
	"github.com/streamproc/processor/txn"
)

var (
	_ Session  = (*memkafka.Session)(nil)
	_ Observer = (*memkafka.Session)(nil)
)

// newMemEnv is newLoopEnv on a memkafka cluster: the same topics, no
// broker; records count against a topic's limit as they do on the wire.
func newMemEnv(t *testing.T) *loopEnv {
	t.Helper()
	c := memkafka.NewCluster(wireBytes)
	e := &loopEnv{t: t, mem: c, in: "in", out: "out", dlq: "dlq", byValue: map[string]*kgo.Record{}}
	for _, topic := range []string{e.in, e.out, e.dlq} {
		c.Create(topic, loopPartitions, 0)
	}
	return e
}

// newMemSession is a session of group on topic in of c.
func newMemSession(c *memkafka.Cluster, group, txnID, in string, m *txn.Metrics) *memkafka.Session {
	return memkafka.NewSession(c, group, txnID, []string{in}, m)
}

// produceMem stores recs (to the input topic when they name none) and
// keeps them, with their offsets, as the input.
func (e *loopEnv) produceMem(recs []*kgo.Record) {
	for _, r := range recs {
		if r.Topic == "" {
			r.Topic = e.in
		}
	}
	e.mem.ProduceInputs(recs)
	for _, r := range recs {
		e.inputs = append(e.inputs, r)
		e.byValue[string(r.Value)] = r
	}
}
