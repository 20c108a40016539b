package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/identity"
)

// identityChain builds the identity chain, with maxBytes the most output
// bytes per input record.
func identityChain(t testing.TB, maxBytes int64) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("identity", transform.Plain("", func() (transform.Transform, error) { return identity.Transform{}, nil }))
	c, err := reg.Build([]transform.Entry{{Name: "identity"}}, nil, transform.MaxOutputBytes(maxBytes))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The identity chain with two workers runs in the loop, no poll handed to
// the workers, and keeps every guarantee of the workers' path: each input
// exactly once in per-key order with its lineage, and an input whose
// output is over the chain's output limit (the one way identity fails)
// dead-lettered under the policy, as the full path does it.
func TestLoopPassThroughChainRunsInTheLoop(t *testing.T) {
	e := newLoopEnv(t)
	const n, keys, limit = 3000, 30, 200
	recs := make([]*kgo.Record, n)
	big := map[string]bool{}
	for i := range recs {
		k, v := loopValue(i, keys)
		recs[i] = &kgo.Record{Topic: e.in, Key: []byte(k), Value: []byte(v)}
		if i%97 == 11 { // over the limit with a header of its own
			recs[i].Headers = []kgo.RecordHeader{{Key: "pad", Value: []byte(strings.Repeat("x", limit))}}
			big[v] = true
		}
	}
	e.produceInputs(recs, kgo.ProducerLinger(time.Millisecond))
	chain := identityChain(t, limit)
	if !chain.PassThrough() {
		t.Fatal("the identity chain does not pass through")
	}
	run := e.start("g", "g-a", chain, Options{Lineage: true, OnError: DeadLetter, DLQTopic: e.dlq,
		Chains: []*transform.Chain{identityChain(t, limit)}})
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	isBig := func(in *kgo.Record) bool { return big[string(in.Value)] }
	e.checkTopic(e.out, e.read(e.out, true), func(in *kgo.Record) bool { return !isBig(in) })
	dead := e.read(e.dlq, true)
	e.checkTopic(e.dlq, dead, isBig)
	for _, d := range dead {
		if stage, _ := header(d, record.HeaderErrorTransform); stage != "identity" {
			t.Errorf("dead letter %.20q names the transform %q, want identity", d.Value, stage)
		}
	}
	checkCounters(t, run, sumOffsets(e.committedOffsets("g")))
	if st := run.p.Stats(); st.Consumed != n || st.Produced != uint64(n-len(big)) {
		t.Errorf("Stats() = %+v, want %d consumed, %d produced", st, n, n-len(big))
	}
	if !run.p.pool.passThrough || len(run.p.pool.workers) != 2 || cap(run.p.pool.results) != 0 {
		t.Errorf("pass through %v, %d workers, results for %d records: want the loop to run every poll of the 2 workers' pool",
			run.p.pool.passThrough, len(run.p.pool.workers), cap(run.p.pool.results))
	}
}
