package integration

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// DeleteTopic deletes topic, failing the test with the broker's answer.
func (tg *Target) DeleteTopic(t testing.TB, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tg.Admin(t).DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting %s: %v", topic, err)
	}
}

// A required destination deleted while the processor runs (the output
// topic, or the route transform's default destination) stops it: Run
// returns a *pipeline.MissingTopicsError naming the topic, and Healthy
// returns that error, instead of aborting every transaction forever while
// healthy. Nothing of the input after the deletion is committed.
func TestRequiredTopicDeletedWhileRunning(t *testing.T) {
	t.Parallel()
	ForEachTarget(t, func(t *testing.T, tg *Target) {
		for _, c := range []struct {
			name  string
			chain func(t testing.TB, def string) *transform.Chain
		}{
			{"output", nil},
			{"route-default", routeChain},
		} {
			t.Run(c.name, func(t *testing.T) {
				in := Input{Topic: Unique("del-in"), N: 400, Keys: 4}
				out, def, group := Unique("del-out"), Unique("del-def"), Unique("del-group")
				tg.NewTopics(t, 1, in.Topic, out, def)
				o := InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out}
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
	ForEachTarget(t, func(t *testing.T, tg *Target) {
		in := Input{Topic: Unique("bindel-in"), N: 200, Keys: 4}
		out, group := Unique("bindel-out"), Unique("bindel-group")
		tg.NewTopics(t, 1, in.Topic, out)
		tg.Produce(t, in, 0, in.N/2)
		p := tg.StartBinary(t, group, group+"-1", in.Topic, out)
		WaitFor(t, 60*time.Second, "the first half to commit", func() bool { return tg.IsCaughtUp(t, group, in.Topic) })
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

// DenyProduce makes the fake brokers refuse every write to topic with
// TOPIC_AUTHORIZATION_FAILED, as a broker does once its WRITE ACL is gone.
func (tg *Target) DenyProduce(t testing.TB, topic string) {
	t.Helper()
	tg.RefuseProduce(t, topic, kerr.TopicAuthorizationFailed.Code)
}

// RefuseProduce makes the fake brokers answer every write to topic (by
// name or by topic ID) with the error code, until lift is called.
func (tg *Target) RefuseProduce(t testing.TB, topic string, code int16) (lift func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details, err := tg.Admin(t).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	id := details[topic].ID
	var lifted atomic.Bool
	tg.Fake.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		tg.Fake.KeepControl()
		if lifted.Load() {
			return nil, nil, false
		}
		req := kr.(*kmsg.ProduceRequest)
		hit := false
		for _, rt := range req.Topics {
			hit = hit || rt.Topic == topic || rt.TopicID == id
		}
		if !hit {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return func() { lifted.Store(true) }
}

// Writing to the output topic refused while running (its WRITE ACL
// removed) is no record's fault: the processor stops with a
// *txn.AccessError naming the output topic, instead of dead-lettering
// every record as if each had failed. kfake only: its brokers are told to
// refuse.
func TestOutputWriteRefusedWhileRunning(t *testing.T) {
	t.Parallel()
	tg := NewFake(t)
	in := Input{Topic: Unique("deny-in"), N: 200, Keys: 4}
	out, dlq, group := Unique("deny-out"), Unique("deny-dlq"), Unique("deny-group")
	tg.NewTopics(t, 1, in.Topic, out, dlq)
	tg.Produce(t, in, 0, in.N/2)
	a := tg.Start(t, InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
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
