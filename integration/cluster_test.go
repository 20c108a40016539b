package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kafkaScript runs integration/kafka/kafka.sh with args.
func kafkaScript(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("bash", append([]string{"kafka/kafka.sh"}, args...)...).CombinedOutput()
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
	tg := &target{name: "kafka-cluster", brokers: strings.Split(bootstrap, ",")}
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
			tg.produce(t, in, i, min(i+in.n/60, in.n))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	kafkaScript(t, "kill", "2")
	time.Sleep(3 * time.Second)
	kafkaScript(t, "start", "2")
	t.Logf("broker 2 down for %s", time.Since(killed).Round(100*time.Millisecond))
	<-fed
	tg.waitCaughtUp(t, group, in.topic, a, b)
	t.Logf("after the broker kill: %s", fmtStats(a, b))
	a.stop(t)
	b.stop(t)
	if got := sumConsumed(a, b); got != uint64(in.n) {
		t.Errorf("committed input records summed over instances = %d, want %d", got, in.n)
	}
	checkExactlyOnce(t, in, tg.readAll(t, out, true))
}
