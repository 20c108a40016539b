package integration

import (
	"errors"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

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
	c, err := reg.Build([]transform.Entry{{Name: "route"}}, settingsLookup(map[string]string{"HEADER": "dest", "DEFAULT": def}))
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
		byKey[srcKey(r)] = r
	}
	seen := map[string]int{}
	for _, r := range dead {
		src, ok := sourceOf(r)
		if !ok {
			t.Errorf("a record in the dead-letter topic without lineage headers (not a dead letter?): key %q headers %v", r.Key, headerKeys(r))
			continue
		}
		seen[src]++
		orig, ok := byKey[src]
		if !ok {
			t.Errorf("dead letter for %s, which should not have failed: %s=%q", src, record.HeaderError, headerValue(r, record.HeaderError))
			continue
		}
		if st := headerValue(r, record.HeaderErrorTransform); st != "produce" {
			t.Errorf("dead letter %s: %s = %q, want produce", src, record.HeaderErrorTransform, st)
		}
		msg := headerValue(r, record.HeaderError)
		for _, s := range errHas(orig) {
			if !strings.Contains(msg, s) {
				t.Errorf("dead letter %s: %s = %q, want it to contain %q", src, record.HeaderError, msg, s)
			}
		}
		if string(r.Value) != string(orig.Value) || string(r.Key) != string(orig.Key) ||
			headerValue(r, "trace") != headerValue(orig, "trace") || headerValue(r, "dest") != headerValue(orig, "dest") {
			t.Errorf("dead letter %s is not the original record: key %q value %q headers %v", src, r.Key, r.Value, headerKeys(r))
		}
		if v := headerValue(r, record.HeaderErrorValueDropped); v != "" {
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
			forEachTarget(t, func(t *testing.T, tg *target) {
				in := input{topic: unique("dest-in"), n: 1500, keys: 30}
				out, dlq, group := unique("dest-out"), unique("dest-dlq"), unique("dest-group")
				missing := unique("dest-never-created")
				partitions := int32(3)
				if policy == pipeline.Fail {
					partitions = 1
				}
				tg.createTopics(t, partitions, in.topic, out, dlq)

				// Routed records among the others: the first ones find out the
				// topic is missing with a produce; later ones are failed at
				// once (the processor remembers the topic is missing).
				var routed []*kgo.Record
				tg.produce(t, in, 0, in.n/3)
				for i := range 4 {
					routed = append(routed, tg.produceSync(t, routedRecord(in.topic, missing, i))...)
				}
				tg.produce(t, in, in.n/3, 2*in.n/3)
				for i := 4; i < 8; i++ {
					routed = append(routed, tg.produceSync(t, routedRecord(in.topic, missing, i))...)
				}
				tg.produce(t, in, 2*in.n/3, in.n)

				o := instanceOpts{group: group, txnID: group + "-a", topics: []string{in.topic}, out: out,
					chain: routeChain(t, out), onError: policy, maxRecords: 300}
				if policy == pipeline.DeadLetter {
					o.dlqTopic = dlq
				}
				a := tg.start(t, o)

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
						t.Errorf("the error names %s/%d/%d, want the first routed record %s", re.Source.Topic, re.Source.Partition, re.Source.Offset, srcKey(first))
					}
					if c, ok := tg.committedOffsets(t, group, in.topic)[first.Partition]; ok && c > first.Offset {
						t.Errorf("partition %d committed to %d, past the failed record at %d", first.Partition, c, first.Offset)
					}
					return
				}

				tg.waitCaughtUpWithin(t, 30*time.Second, group, in.topic, a)
				select {
				case <-a.done:
					t.Fatalf("the instance stopped: %v", a.err)
				default:
				}
				a.stop(t)

				checkExactlyOnce(t, in, tg.readAll(t, out, true))
				dead := tg.readAll(t, dlq, true)
				switch policy {
				case pipeline.DeadLetter:
					checkDeadLetters(t, dead, routed, func(*kgo.Record) []string { return []string{missing} })
					if got := testutil.ToFloat64(a.pm.DLQ); int(got) != len(routed) {
						t.Errorf("records_dlq_total = %v, want %d", got, len(routed))
					}
				case pipeline.Skip:
					if len(dead) != 0 {
						t.Errorf("%d records in the dead-letter topic under skip", len(dead))
					}
					if got := testutil.ToFloat64(a.pm.Skipped); int(got) != len(routed) {
						t.Errorf("records_skipped_total = %v, want %d", got, len(routed))
					}
				}
				if got := testutil.ToFloat64(a.pm.Consumed); int(got) != in.n+len(routed) {
					t.Errorf("records_consumed_total = %v, want %d", got, in.n+len(routed))
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
	forEachTarget(t, func(t *testing.T, tg *target) {
		in1 := input{topic: unique("forbid-in1"), n: 600, keys: 12}
		in2 := input{topic: unique("forbid-in2"), n: 300, keys: 6}
		out, dlq, group := unique("forbid-out"), unique("forbid-dlq"), unique("forbid-group")
		tg.createTopics(t, 2, in1.topic, in2.topic, out, dlq)

		var forbidden []*kgo.Record
		tg.produce(t, in1, 0, in1.n/2)
		tg.produce(t, in2, 0, in2.n/2)
		for i := range 3 {
			forbidden = append(forbidden, tg.produceSync(t,
				routedRecord(in1.topic, in2.topic, i),    // in1 -> the other input
				routedRecord(in2.topic, in1.topic, 10+i), // in2 -> the other input
				routedRecord(in1.topic, dlq, 20+i),       // -> the dead-letter topic
				routedRecord(in2.topic, dlq, 30+i),
			)...)
		}
		tg.produce(t, in1, in1.n/2, in1.n)
		tg.produce(t, in2, in2.n/2, in2.n)
		ends := func(topic string) int { return len(tg.readAll(t, topic, false)) }
		in1Len, in2Len := ends(in1.topic), ends(in2.topic)

		a := tg.start(t, instanceOpts{group: group, txnID: group + "-a", topics: []string{in1.topic, in2.topic}, out: out,
			chain: routeChain(t, out), onError: pipeline.DeadLetter, dlqTopic: dlq, maxRecords: 200})
		// Not fatal: when routed records were written back into an input
		// the group may never catch up, and the checks below say why.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok1, behind1 := tg.CaughtUp(t, group, in1.topic)
			ok2, behind2 := tg.CaughtUp(t, group, in2.topic)
			if ok1 && ok2 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the group did not catch up within 30s (behind: %s; %s)", in1.topic+": "+behind1+"; "+in2.topic+": "+behind2, fmtStats(a))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		a.stop(t)

		// The good records of both inputs are in the output once.
		outs := tg.readAll(t, out, true)
		var from1, from2 []*kgo.Record
		for _, r := range outs {
			src, _ := sourceOf(r)
			if strings.HasPrefix(src, in1.topic+"/") {
				from1 = append(from1, r)
			} else {
				from2 = append(from2, r)
			}
		}
		checkExactlyOnce(t, in1, from1)
		checkExactlyOnce(t, in2, from2)

		checkDeadLetters(t, tg.readAll(t, dlq, true), forbidden, func(orig *kgo.Record) []string {
			dest := headerValue(orig, "dest")
			if dest == dlq {
				return []string{"dead-letter topic", dest}
			}
			return []string{"input topic", dest}
		})
		if got := testutil.ToFloat64(a.pm.DLQ); int(got) != len(forbidden) {
			t.Errorf("records_dlq_total = %v, want %d", got, len(forbidden))
		}
		// Nothing was written back into the inputs.
		if n := ends(in1.topic); n != in1Len {
			t.Errorf("%s has %d records, %d before the processor ran", in1.topic, n, in1Len)
		}
		if n := ends(in2.topic); n != in2Len {
			t.Errorf("%s has %d records, %d before the processor ran", in2.topic, n, in2Len)
		}
		// No produce was attempted: no transaction aborted.
		for _, reason := range []txn.Reason{txn.ReasonProduce, txn.ReasonTransform} {
			if got := testutil.ToFloat64(a.tm.Aborted.WithLabelValues(string(reason))); got != 0 {
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
	forEachTarget(t, func(t *testing.T, tg *target) {
		in, out, group := unique("routedef-in"), unique("routedef-out"), unique("routedef-group")
		tg.createTopics(t, 1, in, out)
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
				missing := unique("routedef-never-created")
				settings := maps.Clone(c.settings)
				settings[c.want] = missing
				p := tg.startBinary(t, group, group+"-"+c.name, in, out, func(inst *launch.Instance) {
					inst.Transforms, inst.Settings = c.transforms, settings
				})
				select {
				case <-p.done:
				case <-time.After(30 * time.Second):
					t.Fatalf("still running 30s after start with %s naming a missing topic", c.want)
				}
				var ee *exec.ExitError
				if !errors.As(p.err, &ee) || ee.ExitCode() != 2 {
					t.Errorf("exit %v, want code 2", p.err)
				}
				var lines []string
				for _, l := range strings.Split(p.logs.String(), "\n") {
					if strings.Contains(l, "configuration error") {
						lines = append(lines, l)
					}
				}
				if len(lines) != 1 || !strings.Contains(lines[0], c.want+"=") || !strings.Contains(lines[0], missing) {
					t.Errorf("configuration error lines %q, want one naming %s and %s", lines, c.want, missing)
				} else {
					t.Log(lines[0])
				}
				if strings.Contains(p.logs.String(), "goroutine ") {
					t.Error("the log has a stack trace")
				}
			})
		}
	})
}
