package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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
	if got := sumConsumed(a, b); got != uint64(in.n) {
		t.Errorf("committed input records summed over instances = %d, want %d", got, in.n)
	}
	checkExactlyOnce(t, in, tg.readAll(t, out, true))
}
