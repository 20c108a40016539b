package faults

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
)

// A processor SIGKILLed mid-transaction and restarted under the same
// transactional ID (and static member ID) fences its dead self, aborts the
// open transaction at once and resumes within 10s. One restarted under a
// new transactional ID cannot abort the dead transaction: it stays open,
// holding back the output's last stable offset (and, had it sent its
// offsets, the group's), until the transaction timeout. Either way the
// output is exactly once.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	for _, sameID := range []bool{true, false} {
		name := "same-transactional-id"
		if !sameID {
			name = "new-transactional-id"
		}
		t.Run(name, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				in := itest.Input{Topic: itest.Unique("crash-in"), N: 30_000, Keys: 300}
				out, group := itest.Unique("crash-out"), itest.Unique("crash-group")
				tg.NewTopics(t, 6, in.Topic, out)
				tg.Produce(t, in, 0, in.N/3)

				// A restarted instance keeps its transactional ID and, with
				// it, its static member ID, so the group hands it back its
				// partitions without waiting out the session timeout.
				static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
				p1 := tg.StartBinary(t, group, group+"-1", in.Topic, out, static)
				itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
				// Keep input arriving so the kill lands inside a transaction.
				fed := make(chan struct{})
				go func() {
					defer close(fed)
					for i := in.N / 3; i < in.N; i += in.N / 30 {
						if t.Context().Err() != nil || !tg.Produce(t, in, i, min(i+in.N/30, in.N)) {
							return
						}
						time.Sleep(30 * time.Millisecond)
					}
				}()
				time.Sleep(300 * time.Millisecond)
				p1.Kill(t)

				id := group + "-1"
				if !sameID {
					id = group + "-2"
				}
				restarted := time.Now()
				p2 := tg.StartBinary(t, group, id, in.Topic, out, static)
				itest.WaitClosed(t, fed, itest.FeedTimeout, "the input feeder to write the last two thirds of the input")
				tg.WaitCaughtUp(t, group, in.Topic)
				itest.WaitFor(t, 5*time.Second, "a progress line showing a commit", func() bool { return !p2.CommittedAt().IsZero() })
				recovery := p2.CommittedAt().Sub(restarted)
				t.Logf("%s: restart to first commit: %s", tg.Name, recovery.Round(10*time.Millisecond))
				p2.Terminate(t)
				itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
				if sameID && recovery > 10*time.Second {
					t.Errorf("recovery under the same transactional ID took %s, want under 10s", recovery)
				}

			})
		})
	}
}

// Dead letters are exactly-once too: a processor with PROCESSOR_ON_ERROR=dlq
// and a jq transform, fed JSON with malformed records among it, is
// SIGKILLed mid-run and restarted; afterwards every input is exactly once
// in the output or the dead-letter topic (eoscheck, one-to-one over both).
func TestDeadLettersUnderCrash(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, dlq, group := itest.Unique("dlqcrash-in"), itest.Unique("dlqcrash-out"), itest.Unique("dlqcrash-dlq"), itest.Unique("dlqcrash-group")
		tg.NewTopics(t, 3, in, out, dlq)
		const n = 20_000
		// write reports whether records [from, to) were all acknowledged,
		// within ProduceTimeout; it may be called from any goroutine.
		write := func(from, to int) bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.DefaultProduceTopic(in))
			if err != nil {
				t.Error(err)
				return false
			}
			defer cl.Close()
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				v := `{"seq":` + strconv.Itoa(i) + `}`
				if i%50 == 7 {
					v = `{"seq":` // malformed
				}
				recs = append(recs, &kgo.Record{Key: []byte("k" + strconv.Itoa(i%40)), Value: []byte(v)})
			}
			ctx, cancel := context.WithTimeout(t.Context(), itest.ProduceTimeout)
			defer cancel()
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				if t.Context().Err() == nil { // else the test has ended: nobody to tell
					t.Errorf("writing records [%d, %d) to %s (deadline %s): %v", from, to, in, itest.ProduceTimeout, err)
				}
				return false
			}
			return true
		}
		write(0, n/2)
		env := func(inst *launch.Instance) {
			inst.InstanceID = group + "-1"
			inst.Transforms, inst.Settings = []string{"jq"}, map[string]string{"PROCESSOR_JQ_EXPR": "."}
			inst.OnError, inst.DLQTopic = "dlq", dlq
		}
		p1 := tg.StartBinary(t, group, group+"-1", in, out, env)
		itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			for i := n / 2; i < n; i += n / 20 {
				if t.Context().Err() != nil || !write(i, i+n/20) {
					return
				}
				time.Sleep(30 * time.Millisecond)
			}
		}()
		time.Sleep(200 * time.Millisecond)
		p1.Kill(t)
		p2 := tg.StartBinary(t, group, group+"-1", in, out, env)
		itest.WaitClosed(t, fed, itest.FeedTimeout, "the input feeder to write the second half of the input")
		tg.WaitCaughtUp(t, group, in)
		p2.Terminate(t)
		tg.Audit(t, group, []string{in}, []string{out, dlq})
		if dead := tg.ReadAll(t, dlq, true); len(dead) != n/50 {
			t.Errorf("%d dead letters, want %d", len(dead), n/50)
		}
	})
}
