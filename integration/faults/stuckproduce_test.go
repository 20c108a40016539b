package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

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
	tg := itest.NewFake(t)
	in := itest.Input{Topic: itest.Unique("stuckprod-in"), N: 100, Keys: 4}
	out, group := itest.Unique("stuckprod-out"), itest.Unique("stuckprod-group")
	tg.NewTopics(t, 1, in.Topic, out)
	tg.Produce(t, in, 0, in.N/2)
	a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out, TxnTimeout: 4 * time.Second, FailingAfter: 5 * time.Second})
	tg.WaitCaughtUpWithin(t, 60*time.Second, group, in.Topic, a)
	lift := tg.RefuseProduce(t, out, kerr.UnsupportedCompressionType.Code)
	// Before the input that the aborts are of: the first abort may come
	// while the produce below is still being acknowledged.
	start := time.Now()
	if !tg.Produce(t, in, in.N/2, in.N) {
		t.Fatal("writing the second half of the input failed")
	}
	var why error
	itest.WaitFor(t, 30*time.Second, "the instance to report itself unhealthy", func() bool {
		why = a.Pipeline.Healthy()
		return why != nil
	})
	took := time.Since(start)
	t.Logf("unhealthy after %s: %v", took.Round(100*time.Millisecond), why)
	if took < 5*time.Second || !strings.Contains(why.Error(), "no transaction has committed for") || !strings.Contains(why.Error(), "aborted in a row") {
		t.Errorf("Healthy() = %v after %s, want the run of aborts after 5s", why, took)
	}
	if st := a.Pipeline.Status(); st.Health == "ok" {
		t.Errorf("/status health is ok while unhealthy")
	}
	lift()
	tg.WaitCaughtUpWithin(t, 60*time.Second, group, in.Topic, a)
	// The commit shows in the group's offsets before the loop accounts for
	// it, which ends the run of aborts: wait for that.
	var still error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if still = a.Pipeline.Healthy(); still == nil || time.Now().After(deadline) {
			break
		}
	}
	if still != nil {
		t.Errorf("still unhealthy 10s after writes succeed again and the group caught up: %v", still)
	}
	itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
}
