package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A broker that refuses every write to the output with an error no retry
// clears and that no record causes (here UNSUPPORTED_COMPRESSION_TYPE, as
// after a change of the topic's compression.type) aborts every
// transaction: the instance must not go on aborting forever while
// /healthz says ok. Once its transactions have aborted with no commit for
// a while (a minute by default, 5s here) it is unhealthy, saying why; when writes succeed again it
// commits every input exactly once and is healthy again. (An error the
// client retries, such as NOT_ENOUGH_REPLICAS, holds up the loop instead,
// which is unhealthy after the transaction timeout.)
func TestProduceNeverSucceedsIsUnhealthy(t *testing.T) {
	t.Parallel()
	tg := newFake(t)
	in := input{topic: unique("stuckprod-in"), n: 100, keys: 4}
	out, group := unique("stuckprod-out"), unique("stuckprod-group")
	tg.createTopics(t, 1, in.topic, out)
	tg.produce(t, in, 0, in.n/2)
	a := tg.start(t, instanceOpts{group: group, txnID: group + "-a", topics: []string{in.topic}, out: out, txnTimeout: 4 * time.Second, failingAfter: 5 * time.Second})
	tg.waitCaughtUpWithin(t, 60*time.Second, group, in.topic, a)
	lift := tg.refuseProduce(t, out, kerr.UnsupportedCompressionType.Code)
	// Before the input that the aborts are of: the first abort may come
	// while the produce below is still being acknowledged.
	start := time.Now()
	if !tg.produce(t, in, in.n/2, in.n) {
		t.Fatal("writing the second half of the input failed")
	}
	var why error
	waitFor(t, 30*time.Second, "the instance to report itself unhealthy", func() bool {
		why = a.p.Healthy()
		return why != nil
	})
	took := time.Since(start)
	t.Logf("unhealthy after %s: %v", took.Round(100*time.Millisecond), why)
	if took < 5*time.Second || !strings.Contains(why.Error(), "no transaction has committed for") || !strings.Contains(why.Error(), "aborted in a row") {
		t.Errorf("Healthy() = %v after %s, want the run of aborts after 5s", why, took)
	}
	if st := a.p.Status(); st.Health == "ok" {
		t.Errorf("/status health is ok while unhealthy")
	}
	lift()
	tg.waitCaughtUpWithin(t, 60*time.Second, group, in.topic, a)
	// The commit shows in the group's offsets before the loop accounts for
	// it, which ends the run of aborts: wait for that.
	var still error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if still = a.p.Healthy(); still == nil || time.Now().After(deadline) {
			break
		}
	}
	if still != nil {
		t.Errorf("still unhealthy 10s after writes succeed again and the group caught up: %v", still)
	}
	checkExactlyOnce(t, in, tg.readAll(t, out, true))
}
