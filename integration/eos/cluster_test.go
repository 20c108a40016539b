package eos

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamproc/processor/txn"
)

// kafkaScriptTimeout bounds one kafka.sh command: a node's start waits up
// to 90s for the broker (KAFKA_START_TIMEOUT) after up to 150s for the run
// folder's lock.
const kafkaScriptTimeout = 5 * time.Minute

// kafkaScript runs integration/kafka/kafka.sh with args.
func kafkaScript(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaScriptTimeout)
	defer cancel()
	// Killed at the deadline; WaitDelay lets CombinedOutput return even if
	// a broker it started still holds its output.
	cmd := exec.CommandContext(ctx, "bash", append([]string{"../kafka/kafka.sh"}, args...)...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("kafka.sh %s did not finish within %s, killed: %v\n%s", strings.Join(args, " "), kafkaScriptTimeout, err, out)
	}
	if err != nil {
		t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// On the three-node Apache Kafka cluster (replication factor 3, min ISR 2),
// two processors ride out a SIGKILL of one broker and its restart while
// input keeps arriving: nothing is lost or duplicated and neither exits.
// Needs PROCESSOR_TEST_CLUSTER (make test-cluster and .ci/run set it).
func TestClusterBrokerKillAndRestart(t *testing.T) {
	bootstrap := os.Getenv("PROCESSOR_TEST_CLUSTER")
	if bootstrap == "" {
		t.Skip("PROCESSOR_TEST_CLUSTER is not set: run make test-cluster")
	}
	tg := itest.NewTarget(t, "kafka-cluster", strings.Split(bootstrap, ","))
	in := itest.Input{Topic: itest.Unique("cluster-in"), N: 30_000, Keys: 300}
	out, group := itest.Unique("cluster-out"), itest.Unique("cluster-group")
	tg.NewTopics(t, 6, in.Topic, out)
	tg.Produce(t, in, 0, in.N/3)

	o := itest.InstanceOpts{Group: group, Topics: []string{in.Topic}, Out: out, MaxRecords: 1000}
	o.TxnID = group + "-a"
	a := tg.Start(t, o)
	o.TxnID = group + "-b"
	b := tg.Start(t, o)
	itest.WaitFor(t, 60*time.Second, "both instances to commit", func() bool {
		return a.Pipeline.Stats().Commits > 0 && b.Pipeline.Stats().Commits > 0
	})

	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := in.N / 3; i < in.N; i += in.N / 60 {
			if t.Context().Err() != nil || !tg.Produce(t, in, i, min(i+in.N/60, in.N)) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	kafkaScript(t, "kill", "2")
	time.Sleep(3 * time.Second)
	kafkaScript(t, "start", "2")
	t.Logf("broker 2 down for %s", time.Since(killed).Round(100*time.Millisecond))
	itest.WaitClosed(t, fed, itest.FeedTimeout, "the input feeder to write the last two thirds of the input")
	tg.WaitCaughtUp(t, group, in.Topic, a, b)
	t.Logf("after the broker kill: %s", itest.FmtStats(a, b))
	a.Stop(t)
	b.Stop(t)
	// A transaction whose ending failed (end_error) has an unknown outcome
	// and is counted as aborted. When the broker had committed it after
	// all (the EndTxn landed, its response did not), its records are not
	// consumed again, and the counters miss them: at most o.MaxRecords for
	// each such transaction. The output is exactly once either way.
	unknown := uint64(endErrors(a, b))
	if got, n := itest.SumConsumed(a, b), uint64(in.N); got > n || got+unknown*uint64(o.MaxRecords) < n || (unknown == 0 && got != n) {
		t.Errorf("committed input records summed over instances = %d, want %d (%d transactions ended with an unknown outcome)", got, n, unknown)
	}
	itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
}

// endErrors is the transactions of ins whose ending failed with an unknown
// outcome.
func endErrors(ins ...*itest.Instance) float64 {
	var n float64
	for _, in := range ins {
		n += testutil.ToFloat64(in.TxnMetrics.Aborted.WithLabelValues(string(txn.ReasonEndError)))
	}
	return n
}
