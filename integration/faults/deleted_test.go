package faults

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// A required destination deleted while the processor runs (the output
// topic, or the route transform's default destination) stops it: Run
// returns a *pipeline.MissingTopicsError naming the topic, and Healthy
// returns that error, instead of aborting every transaction forever while
// healthy. Nothing of the input after the deletion is committed.
func TestRequiredTopicDeletedWhileRunning(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		for _, c := range []struct {
			name  string
			chain func(t testing.TB, def string) *transform.Chain
		}{
			{"output", nil},
			{"route-default", routeChain},
		} {
			t.Run(c.name, func(t *testing.T) {
				in := itest.Input{Topic: itest.Unique("del-in"), N: 400, Keys: 4}
				out, def, group := itest.Unique("del-out"), itest.Unique("del-def"), itest.Unique("del-group")
				tg.NewTopics(t, 1, in.Topic, out, def)
				o := itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out}
				deleted := out
				if c.chain != nil {
					o.Chain, deleted = c.chain(t, def), def
				}
				tg.Produce(t, in, 0, in.N/2)
				a := tg.Start(t, o)
				tg.WaitCaughtUpWithin(t, 60*time.Second, group, in.Topic, a)
				if err := a.Pipeline.Healthy(); err != nil {
					t.Fatalf("unhealthy before the deletion: %v", err)
				}
				tg.DeleteTopic(t, deleted)
				tg.Produce(t, in, in.N/2, in.N)

				err := waitStopped(t, a, 60*time.Second, "its required topic "+deleted+" was deleted")
				var missing *pipeline.MissingTopicsError
				if !errors.As(err, &missing) || !missing.Deleted || !slices.Equal(missing.Topics, []string{deleted}) {
					t.Fatalf("Run returned %v, want a *pipeline.MissingTopicsError naming %s as deleted", err, deleted)
				}
				if h := a.Pipeline.Healthy(); h == nil || !strings.Contains(h.Error(), deleted) {
					t.Errorf("Healthy() = %v after the stop, want the error naming %s", h, deleted)
				}
				if c, ok := tg.CommittedOffsets(t, group, in.Topic)[0]; !ok || c > int64(in.N/2) {
					t.Errorf("committed offset %d (found %v), want %d: nothing after the deletion may commit", c, ok, in.N/2)
				}
			})
		}
	})
}

// The binary whose output topic is deleted while it runs exits 1 with one
// line naming the topic and PROCESSOR_OUTPUT_TOPIC.
func TestBinaryOutputTopicDeletedExits1(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("bindel-in"), N: 200, Keys: 4}
		out, group := itest.Unique("bindel-out"), itest.Unique("bindel-group")
		tg.NewTopics(t, 1, in.Topic, out)
		tg.Produce(t, in, 0, in.N/2)
		p := tg.StartBinary(t, group, group+"-1", in.Topic, out)
		itest.WaitFor(t, 60*time.Second, "the first half to commit", func() bool { return tg.IsCaughtUp(t, group, in.Topic) })
		tg.DeleteTopic(t, out)
		tg.Produce(t, in, in.N/2, in.N)
		select {
		case <-p.Done:
		case <-time.After(90 * time.Second):
			t.Fatal("still running 90s after its output topic was deleted")
		}
		var ee *exec.ExitError
		if !errors.As(p.Err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want code 1", p.Err)
		}
		var line string
		for _, l := range strings.Split(p.Logs.String(), "\n") {
			if strings.Contains(l, "does not exist any more") {
				if line != "" {
					t.Errorf("more than one line says the topic is gone: %q and %q", line, l)
				}
				line = l
			}
		}
		if !strings.Contains(line, out) || !strings.Contains(line, "PROCESSOR_OUTPUT_TOPIC") || !strings.Contains(line, "level=ERROR") {
			t.Errorf("the stop line %q does not name %s and PROCESSOR_OUTPUT_TOPIC at level ERROR", line, out)
		}
	})
}

// Writing to the output topic refused while running (its WRITE ACL
// removed) is no record's fault: the processor stops with a
// *txn.AccessError naming the output topic, instead of dead-lettering
// every record as if each had failed. kfake only: its brokers are told to
// refuse.
func TestOutputWriteRefusedWhileRunning(t *testing.T) {
	t.Parallel()
	tg := itest.NewFake(t)
	in := itest.Input{Topic: itest.Unique("deny-in"), N: 200, Keys: 4}
	out, dlq, group := itest.Unique("deny-out"), itest.Unique("deny-dlq"), itest.Unique("deny-group")
	tg.NewTopics(t, 1, in.Topic, out, dlq)
	tg.Produce(t, in, 0, in.N/2)
	a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
		OnError: pipeline.DeadLetter, DLQTopic: dlq})
	tg.WaitCaughtUpWithin(t, 60*time.Second, group, in.Topic, a)
	tg.DenyProduce(t, out)
	tg.Produce(t, in, in.N/2, in.N)

	err := waitStopped(t, a, 60*time.Second, "writing to its output topic was refused")
	var access *txn.AccessError
	if !errors.As(err, &access) || access.Kind != txn.AccessDenied || !strings.Contains(access.Resource, out) {
		t.Fatalf("Run returned %v, want a *txn.AccessError refusing output topic %s", err, out)
	}
	if dead := tg.ReadAll(t, dlq, true); len(dead) > 0 {
		t.Errorf("%d records dead-lettered; none failed", len(dead))
	}
}
