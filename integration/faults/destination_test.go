package faults

import (
	"errors"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/route"
	"github.com/streamproc/processor/txn"
)

// routeChain is one route entry, built through a registry the way the
// processor builds it: the topic comes from the "dest" header, and records
// without one go to def.
func routeChain(t testing.TB, def string) *transform.Chain {
	t.Helper()
	reg := &transform.Registry{}
	reg.Register("route", transform.Typed("", route.New))
	c, err := reg.Build([]transform.Entry{{Name: "route"}}, itest.SettingsLookup(map[string]string{"HEADER": "dest", "DEFAULT": def}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// routedRecord is an input record that the route chain sends to dest.
func routedRecord(topic, dest string, i int) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte("routed" + strconv.Itoa(i)), Value: []byte("to " + dest + " #" + strconv.Itoa(i)),
		Headers: []kgo.RecordHeader{{Key: "dest", Value: []byte(dest)}, {Key: "trace", Value: []byte("routed-" + strconv.Itoa(i))}}}
}

// checkDeadLetters asserts that dead holds exactly one dead letter per record
// of want, each the original record (key, value, headers) with
// processor.error.transform "produce" and a processor.error containing
// every string of errHas.
func checkDeadLetters(t testing.TB, dead []*kgo.Record, want []*kgo.Record, errHas func(orig *kgo.Record) []string) {
	t.Helper()
	byKey := map[string]*kgo.Record{}
	for _, r := range want {
		byKey[itest.SrcKey(r)] = r
	}
	seen := map[string]int{}
	for _, r := range dead {
		src, ok := itest.SourceOf(r)
		if !ok {
			t.Errorf("a record in the dead-letter topic without lineage headers (not a dead letter?): key %q headers %v", r.Key, headerKeys(r))
			continue
		}
		seen[src]++
		orig, ok := byKey[src]
		if !ok {
			t.Errorf("dead letter for %s, which should not have failed: %s=%q", src, record.HeaderError, itest.HeaderValue(r, record.HeaderError))
			continue
		}
		if st := itest.HeaderValue(r, record.HeaderErrorTransform); st != "produce" {
			t.Errorf("dead letter %s: %s = %q, want produce", src, record.HeaderErrorTransform, st)
		}
		msg := itest.HeaderValue(r, record.HeaderError)
		for _, s := range errHas(orig) {
			if !strings.Contains(msg, s) {
				t.Errorf("dead letter %s: %s = %q, want it to contain %q", src, record.HeaderError, msg, s)
			}
		}
		if string(r.Value) != string(orig.Value) || string(r.Key) != string(orig.Key) ||
			itest.HeaderValue(r, "trace") != itest.HeaderValue(orig, "trace") || itest.HeaderValue(r, "dest") != itest.HeaderValue(orig, "dest") {
			t.Errorf("dead letter %s is not the original record: key %q value %q headers %v", src, r.Key, r.Value, headerKeys(r))
		}
		if v := itest.HeaderValue(r, record.HeaderErrorValueDropped); v != "" {
			t.Errorf("dead letter %s has %s = %q; its value fits", src, record.HeaderErrorValueDropped, v)
		}
	}
	for k := range byKey {
		if seen[k] != 1 {
			t.Errorf("record %s has %d dead letters, want 1", k, seen[k])
		}
	}
}

// Records routed to a topic that does not exist fail under the error
// policy, the rest flows on: under dlq each lands in the dead-letter topic
// naming the missing topic, with processor.error.transform "produce";
// under skip each is counted in records_skipped_total; either way the
// other records are output exactly once and the group catches up, with no
// stall of retried transactions. Under fail, Run returns a RecordError
// naming the missing topic.
func TestDestinationMissingTopic(t *testing.T) {
	t.Parallel()
	for _, policy := range []pipeline.OnError{pipeline.DeadLetter, pipeline.Skip, pipeline.Fail} {
		t.Run(string(policy), func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				in := itest.Input{Topic: itest.Unique("dest-in"), N: 1500, Keys: 30}
				out, dlq, group := itest.Unique("dest-out"), itest.Unique("dest-dlq"), itest.Unique("dest-group")
				missing := itest.Unique("dest-never-created")
				partitions := int32(3)
				if policy == pipeline.Fail {
					partitions = 1
				}
				tg.NewTopics(t, partitions, in.Topic, out, dlq)

				// Routed records among the others: the first ones find out the
				// topic is missing with a produce; later ones are failed at
				// once (the processor remembers the topic is missing).
				var routed []*kgo.Record
				tg.Produce(t, in, 0, in.N/3)
				for i := range 4 {
					routed = append(routed, tg.SyncProduce(t, routedRecord(in.Topic, missing, i))...)
				}
				tg.Produce(t, in, in.N/3, 2*in.N/3)
				for i := 4; i < 8; i++ {
					routed = append(routed, tg.SyncProduce(t, routedRecord(in.Topic, missing, i))...)
				}
				tg.Produce(t, in, 2*in.N/3, in.N)

				o := itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in.Topic}, Out: out,
					Chain: routeChain(t, out), OnError: policy, MaxRecords: 300}
				if policy == pipeline.DeadLetter {
					o.DLQTopic = dlq
				}
				a := tg.Start(t, o)

				if policy == pipeline.Fail {
					err := waitStopped(t, a, 30*time.Second, "a record was routed to a missing topic under fail")
					var re *pipeline.RecordError
					if !errors.As(err, &re) {
						t.Fatalf("Run returned %v, want a *pipeline.RecordError", err)
					}
					if !strings.Contains(err.Error(), missing) {
						t.Errorf("Run returned %q, want it to name the missing topic %s", err, missing)
					}
					first := routed[0]
					if re.Source.Topic != first.Topic || re.Source.Partition != first.Partition || re.Source.Offset != first.Offset {
						t.Errorf("the error names %s/%d/%d, want the first routed record %s", re.Source.Topic, re.Source.Partition, re.Source.Offset, itest.SrcKey(first))
					}
					if c, ok := tg.CommittedOffsets(t, group, in.Topic)[first.Partition]; ok && c > first.Offset {
						t.Errorf("partition %d committed to %d, past the failed record at %d", first.Partition, c, first.Offset)
					}
					return
				}

				tg.WaitCaughtUpWithin(t, 30*time.Second, group, in.Topic, a)
				select {
				case <-a.Done:
					t.Fatalf("the instance stopped: %v", a.Err)
				default:
				}
				a.Stop(t)

				itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
				dead := tg.ReadAll(t, dlq, true)
				switch policy {
				case pipeline.DeadLetter:
					checkDeadLetters(t, dead, routed, func(*kgo.Record) []string { return []string{missing} })
					if got := testutil.ToFloat64(a.PipelineMetrics.DLQ); int(got) != len(routed) {
						t.Errorf("records_dlq_total = %v, want %d", got, len(routed))
					}
				case pipeline.Skip:
					if len(dead) != 0 {
						t.Errorf("%d records in the dead-letter topic under skip", len(dead))
					}
					if got := testutil.ToFloat64(a.PipelineMetrics.Skipped); int(got) != len(routed) {
						t.Errorf("records_skipped_total = %v, want %d", got, len(routed))
					}
				}
				if got := testutil.ToFloat64(a.PipelineMetrics.Consumed); int(got) != in.N+len(routed) {
					t.Errorf("records_consumed_total = %v, want %d", got, in.N+len(routed))
				}
			})
		})
	}
}

// An output routed to another input topic of the same processor (it would
// consume its own output) or to its dead-letter topic (it would mix outputs
// into its dead letters) fails its record under the policy, without a
// produce: under dlq it is dead-lettered with a message saying where it was
// routed, and neither topic receives the routed record.
func TestDestinationForbidden(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in1 := itest.Input{Topic: itest.Unique("forbid-in1"), N: 600, Keys: 12}
		in2 := itest.Input{Topic: itest.Unique("forbid-in2"), N: 300, Keys: 6}
		out, dlq, group := itest.Unique("forbid-out"), itest.Unique("forbid-dlq"), itest.Unique("forbid-group")
		tg.NewTopics(t, 2, in1.Topic, in2.Topic, out, dlq)

		var forbidden []*kgo.Record
		tg.Produce(t, in1, 0, in1.N/2)
		tg.Produce(t, in2, 0, in2.N/2)
		for i := range 3 {
			forbidden = append(forbidden, tg.SyncProduce(t,
				routedRecord(in1.Topic, in2.Topic, i),    // in1 -> the other input
				routedRecord(in2.Topic, in1.Topic, 10+i), // in2 -> the other input
				routedRecord(in1.Topic, dlq, 20+i),       // -> the dead-letter topic
				routedRecord(in2.Topic, dlq, 30+i),
			)...)
		}
		tg.Produce(t, in1, in1.N/2, in1.N)
		tg.Produce(t, in2, in2.N/2, in2.N)
		ends := func(topic string) int { return len(tg.ReadAll(t, topic, false)) }
		in1Len, in2Len := ends(in1.Topic), ends(in2.Topic)

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{in1.Topic, in2.Topic}, Out: out,
			Chain: routeChain(t, out), OnError: pipeline.DeadLetter, DLQTopic: dlq, MaxRecords: 200})
		// Not fatal: when routed records were written back into an input
		// the group may never catch up, and the checks below say why.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok1, behind1 := tg.CaughtUp(t, group, in1.Topic)
			ok2, behind2 := tg.CaughtUp(t, group, in2.Topic)
			if ok1 && ok2 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the group did not catch up within 30s (behind: %s; %s)", in1.Topic+": "+behind1+"; "+in2.Topic+": "+behind2, itest.FmtStats(a))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		a.Stop(t)

		// The good records of both inputs are in the output once.
		outs := tg.ReadAll(t, out, true)
		var from1, from2 []*kgo.Record
		for _, r := range outs {
			src, _ := itest.SourceOf(r)
			if strings.HasPrefix(src, in1.Topic+"/") {
				from1 = append(from1, r)
			} else {
				from2 = append(from2, r)
			}
		}
		itest.CheckExactlyOnce(t, in1, from1)
		itest.CheckExactlyOnce(t, in2, from2)

		checkDeadLetters(t, tg.ReadAll(t, dlq, true), forbidden, func(orig *kgo.Record) []string {
			dest := itest.HeaderValue(orig, "dest")
			if dest == dlq {
				return []string{"dead-letter topic", dest}
			}
			return []string{"input topic", dest}
		})
		if got := testutil.ToFloat64(a.PipelineMetrics.DLQ); int(got) != len(forbidden) {
			t.Errorf("records_dlq_total = %v, want %d", got, len(forbidden))
		}
		// Nothing was written back into the inputs.
		if n := ends(in1.Topic); n != in1Len {
			t.Errorf("%s has %d records, %d before the processor ran", in1.Topic, n, in1Len)
		}
		if n := ends(in2.Topic); n != in2Len {
			t.Errorf("%s has %d records, %d before the processor ran", in2.Topic, n, in2Len)
		}
		// No produce was attempted: no transaction aborted.
		for _, reason := range []txn.Reason{txn.ReasonProduce, txn.ReasonTransform} {
			if got := testutil.ToFloat64(a.TxnMetrics.Aborted.WithLabelValues(string(reason))); got != 0 {
				t.Errorf("aborted{reason=%s} = %v, want 0", reason, got)
			}
		}
	})
}

// PROCESSOR_ROUTE_DEFAULT names a topic that must exist, like the output
// topic: a missing one exits 2 at start with one line naming the variable
// (the aliased one for route@r2), not a loop of aborted transactions.
func TestRouteDefaultMissingExits2(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, group := itest.Unique("routedef-in"), itest.Unique("routedef-out"), itest.Unique("routedef-group")
		tg.NewTopics(t, 1, in, out)
		for _, c := range []struct {
			name, want string
			transforms []string
			settings   map[string]string
		}{
			{"route", "PROCESSOR_ROUTE_DEFAULT", []string{"route"}, map[string]string{"PROCESSOR_ROUTE_HEADER": "dest"}},
			{"alias", "PROCESSOR_ROUTE_R2_DEFAULT", []string{"route@r2"}, map[string]string{"PROCESSOR_ROUTE_R2_HEADER": "dest"}},
			// Two entries, only the second one's default missing: the
			// message names that entry's variable.
			{"second", "PROCESSOR_ROUTE_R2_DEFAULT", []string{"route", "route@r2"},
				map[string]string{"PROCESSOR_ROUTE_HEADER": "dest", "PROCESSOR_ROUTE_DEFAULT": out, "PROCESSOR_ROUTE_R2_HEADER": "dest"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				missing := itest.Unique("routedef-never-created")
				settings := maps.Clone(c.settings)
				settings[c.want] = missing
				p := tg.StartBinary(t, group, group+"-"+c.name, in, out, func(inst *launch.Instance) {
					inst.Transforms, inst.Settings = c.transforms, settings
				})
				select {
				case <-p.Done:
				case <-time.After(30 * time.Second):
					t.Fatalf("still running 30s after start with %s naming a missing topic", c.want)
				}
				var ee *exec.ExitError
				if !errors.As(p.Err, &ee) || ee.ExitCode() != 2 {
					t.Errorf("exit %v, want code 2", p.Err)
				}
				var lines []string
				for _, l := range strings.Split(p.Logs.String(), "\n") {
					if strings.Contains(l, "configuration error") {
						lines = append(lines, l)
					}
				}
				if len(lines) != 1 || !strings.Contains(lines[0], c.want+"=") || !strings.Contains(lines[0], missing) {
					t.Errorf("configuration error lines %q, want one naming %s and %s", lines, c.want, missing)
				} else {
					t.Log(lines[0])
				}
				if strings.Contains(p.Logs.String(), "goroutine ") {
					t.Error("the log has a stack trace")
				}
			})
		}
	})
}
