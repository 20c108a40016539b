package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

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
	cmd := exec.CommandContext(ctx, "bash", append([]string{"kafka/kafka.sh"}, args...)...)
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
	tg := newTarget(t, "kafka-cluster", strings.Split(bootstrap, ","))
	in := input{topic: unique("cluster-in"), n: 30_000, keys: 300}
	out, group := unique("cluster-out"), unique("cluster-group")
	tg.createTopics(t, 6, in.topic, out)
	tg.produce(t, in, 0, in.n/3)

	o := instanceOpts{group: group, topics: []string{in.topic}, out: out, maxRecords: 1000}
	o.txnID = group + "-a"
	a := tg.start(t, o)
	o.txnID = group + "-b"
	b := tg.start(t, o)
	waitFor(t, 60*time.Second, "both instances to commit", func() bool {
		return a.p.Stats().Commits > 0 && b.p.Stats().Commits > 0
	})

	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := in.n / 3; i < in.n; i += in.n / 60 {
			if t.Context().Err() != nil || !tg.produce(t, in, i, min(i+in.n/60, in.n)) {
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
	waitClosed(t, fed, feedTimeout, "the input feeder to write the last two thirds of the input")
	tg.waitCaughtUp(t, group, in.topic, a, b)
	t.Logf("after the broker kill: %s", fmtStats(a, b))
	a.stop(t)
	b.stop(t)
	// A transaction whose ending failed (end_error) has an unknown outcome
	// and is counted as aborted. When the broker had committed it after
	// all (the EndTxn landed, its response did not), its records are not
	// consumed again, and the counters miss them: at most o.maxRecords for
	// each such transaction. The output is exactly once either way.
	unknown := uint64(endErrors(a, b))
	if got, n := sumConsumed(a, b), uint64(in.n); got > n || got+unknown*uint64(o.maxRecords) < n || (unknown == 0 && got != n) {
		t.Errorf("committed input records summed over instances = %d, want %d (%d transactions ended with an unknown outcome)", got, n, unknown)
	}
	checkExactlyOnce(t, in, tg.readAll(t, out, true))
}

// endErrors is the transactions of ins whose ending failed with an unknown
// outcome.
func endErrors(ins ...*instance) float64 {
	var n float64
	for _, in := range ins {
		n += testutil.ToFloat64(in.tm.Aborted.WithLabelValues(string(txn.ReasonEndError)))
	}
	return n
}
