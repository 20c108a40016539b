package windowed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/state"
)

// orders returns n orders keyed by their order id, spread over every
// partition of the input by Kafka's default partitioner, the first of
// every three (and those of customers[0] alone when one customer) of
// customers[0], the others of customers[1].
func orders(topic string, n int, customers ...string) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range n {
		c := customers[0]
		if len(customers) > 1 && i%3 != 0 {
			c = customers[1]
		}
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "order-%d", i),
			Value: fmt.Appendf(nil, `{"customer_id":%q,"order":%d}`, c, i)}
	}
	return recs
}

// byCustomer is a count of orders by .customer_id.
func byCustomer(dir, ordering string, chain []string, more map[string]string) func(*launch.Instance) {
	set := map[string]string{"PROCESSOR_AGGREGATE_BY": ".customer_id"}
	for k, v := range more {
		set[k] = v
	}
	return itest.Stateful(dir, ordering, "0.2", chain, set)
}

// customerCounts reads the committed counts of out per customer, in
// output order, failing on an output that is not a count.
func customerCounts(t *testing.T, tg *itest.Target, out string) map[string][]int64 {
	t.Helper()
	counts := map[string][]int64{}
	for _, r := range tg.ReadAll(t, out, true) {
		var v struct {
			Key   string `json:"key"`
			Value int64  `json:"value"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Key != string(r.Key) {
			t.Fatalf("output %s keyed %q is not a count of its key (%v)", r.Value, r.Key, err)
		}
		counts[v.Key] = append(counts[v.Key], v.Value)
	}
	return counts
}

// checkRun checks that customer's counts run 1..want in output order,
// each once.
func checkRun(t *testing.T, counts map[string][]int64, customer string, want int) {
	t.Helper()
	got := counts[customer]
	for i, c := range got {
		if c != int64(i+1) {
			t.Fatalf("customer %s: count %d at position %d (of %d counts, last %d), want %d: not exactly once",
				customer, c, i, len(got), got[len(got)-1], i+1)
		}
	}
	if len(got) != want {
		t.Fatalf("customer %s: %d counts, want 1..%d", customer, len(got), want)
	}
}

// The scenario: 400 orders of one customer (and 800 of another),
// keyed by order id over 4 partitions, counted by .customer_id through
// the repartition topic: the counts run 1..400 (1..800) exactly once, in
// one aggregate per customer, though two instances share the group (a
// rebalance), one is killed by SIGKILL in the middle and started again,
// and a fifth of the transactions abort. Both orderings: with key
// ordering the hop makes the group key the dealing key. eoscheck follows
// every output's lineage across the hop to its input: each input once.
// The consumed repartition records are purged.
func TestRepartitionCountByField(t *testing.T) {
	t.Parallel()
	for _, ordering := range []string{"partition", "key"} {
		t.Run(ordering, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				in, out, group := itest.Unique("bycust-in"), itest.Unique("bycust-out"), itest.Unique("bycust-group")
				tg.NewTopics(t, 4, in, out)
				recs := orders(in, 1200, "alice", "bob")
				hop := state.RepartitionTopic(group, "aggregate")
				purge := map[string]string{"PROCESSOR_REPARTITION_PURGE_INTERVAL": "1s"}
				set1 := byCustomer(t.TempDir(), ordering, []string{"aggregate"}, purge)
				set2 := byCustomer(t.TempDir(), ordering, []string{"aggregate"}, purge)
				tg.ProduceSync(t, recs[:400])
				p1 := tg.StartBinary(t, group, group+"-1", in, out, set1)
				itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
				p2 := tg.StartBinary(t, group, group+"-2", in, out, set2)
				tg.ProduceSync(t, recs[400:800])
				time.Sleep(time.Second)
				p1.Kill(t)
				p1 = tg.StartBinary(t, group, group+"-1", in, out, set1)
				tg.ProduceSync(t, recs[800:])
				tg.WaitCaughtUp(t, group, in)
				tg.WaitHopCaughtUp(t, group, hop)
				itest.WaitFor(t, 30*time.Second, "the consumed repartition records purged", func() bool {
					starts, err := tg.Admin(t).ListStartOffsets(t.Context(), hop)
					if err != nil {
						return false
					}
					var purged int64
					starts.Each(func(o kadm.ListedOffset) { purged += o.Offset })
					return purged > 0
				})
				p1.Terminate(t)
				p2.Terminate(t)

				counts := customerCounts(t, tg, out)
				checkRun(t, counts, "alice", 400)
				checkRun(t, counts, "bob", 800)
				if len(counts) != 2 {
					t.Errorf("counts of %d customers, want 2", len(counts))
				}
				tg.AuditRun(t, group, in, out, check.Options{OneToOne: true, ExpectAll: true})
			})
		})
	}
}

// A chain with a stateful stage on each side of the hop: dedupe by the
// record key (the order id, partitioned like the input) drops the
// duplicates of every order, then aggregate counts the orders by
// .customer_id behind the hop; a SIGKILL in the middle.
func TestRepartitionDedupeThenCount(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, group := itest.Unique("dedupcount-in"), itest.Unique("dedupcount-out"), itest.Unique("dedupcount-group")
		tg.NewTopics(t, 4, in, out)
		recs := orders(in, 300, "carol")
		recs = append(recs, orders(in, 300, "carol")...) // every order twice
		set := byCustomer(t.TempDir(), "partition", []string{"dedupe", "aggregate"}, nil)
		tg.ProduceSync(t, recs[:300])
		p := tg.StartBinary(t, group, group+"-1", in, out, set)
		itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p.CommittedAt().IsZero() })
		p.Kill(t)
		p = tg.StartBinary(t, group, group+"-1", in, out, set)
		tg.ProduceSync(t, recs[300:])
		tg.WaitCaughtUp(t, group, in)
		tg.WaitHopCaughtUp(t, group, state.RepartitionTopic(group, "aggregate"))
		p.Terminate(t)
		checkRun(t, customerCounts(t, tg, out), "carol", 300)
	})
}

// PARTITIONED_BY_KEY=true skips the hop: no repartition topic is made,
// and the counts are per partition again (here the input is keyed by the
// customer, so they are right).
func TestRepartitionSkippedByKey(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, group := itest.Unique("bykey-in"), itest.Unique("bykey-out"), itest.Unique("bykey-group")
		tg.NewTopics(t, 4, in, out)
		recs := orders(in, 200, "dave")
		for i, r := range recs { // keyed by the customer: 40 customers, every partition
			c := fmt.Sprintf("cust-%d", i%40)
			r.Key, r.Value = []byte(c), fmt.Appendf(nil, `{"customer_id":%q}`, c)
		}
		tg.ProduceSync(t, recs)
		p := tg.StartBinary(t, group, group+"-1", in, out,
			byCustomer(t.TempDir(), "partition", []string{"aggregate"}, map[string]string{"PROCESSOR_AGGREGATE_PARTITIONED_BY_KEY": "true"}))
		tg.WaitCaughtUp(t, group, in)
		p.Terminate(t)
		counts := customerCounts(t, tg, out)
		for i := range 40 {
			checkRun(t, counts, fmt.Sprintf("cust-%d", i), 5)
		}
		hop := state.RepartitionTopic(group, "aggregate")
		td, err := tg.Admin(t).ListTopics(t.Context(), hop)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := td[hop]; ok && d.Err == nil {
			t.Errorf("the repartition topic %s was created though PARTITIONED_BY_KEY=true", hop)
		}
	})
}

// The refusals, each exit 2 with one line: an existing repartition topic
// with another partition count, a compacted one, a database sink, and a
// second stateful stage behind the hop.
func TestRepartitionRefusals(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out := itest.Unique("hoprefuse-in"), itest.Unique("hoprefuse-out")
		tg.NewTopics(t, 4, in, out)
		cases := []struct {
			name   string
			topic  func(group string) // creates the mismatched repartition topic
			chain  []string
			extra  []string
			phrase string
		}{
			{name: "partitions", topic: func(g string) { tg.NewTopics(t, 2, state.RepartitionTopic(g, "aggregate")) },
				chain: []string{"aggregate"}, phrase: "has 2 partitions, the input 4"},
			{name: "compact", topic: func(g string) {
				tg.CreateTopicWithConfigs(t, 4, map[string]string{"cleanup.policy": "compact"}, state.RepartitionTopic(g, "aggregate"))
			}, chain: []string{"aggregate"}, phrase: "cleanup.policy=compact, want delete"},
			{name: "postgres", chain: []string{"aggregate"}, extra: []string{"PROCESSOR_SINK=postgres", "PROCESSOR_POSTGRES_URL=postgres://x@127.0.0.1:1/x"},
				phrase: "PROCESSOR_SINK=\"postgres\" is invalid: want kafka"},
			{name: "second hop", chain: []string{"aggregate", "aggregate@again"}, extra: []string{"PROCESSOR_AGGREGATE_AGAIN_STORE=again"}, phrase: "at most one repartition hop"},
		}
		for _, c := range cases {
			group := itest.Unique("hoprefuse-group")
			if c.topic != nil {
				c.topic(group)
			}
			p := tg.StartBinary(t, group, group+"-1", in, out, byCustomer(t.TempDir(), "partition", c.chain, nil),
				func(inst *launch.Instance) { inst.Extra = append(inst.Extra, c.extra...) })
			select {
			case <-p.Done:
			case <-time.After(60 * time.Second):
				t.Fatalf("%s: still running", c.name)
			}
			var ee *exec.ExitError
			if !errors.As(p.Err, &ee) || ee.ExitCode() != 2 || !strings.Contains(p.Logs.String(), c.phrase) {
				t.Errorf("%s: exit %v, log %q; want exit 2 saying %q", c.name, p.Err, p.Logs.String(), c.phrase)
			}
			if n := strings.Count(p.Logs.String(), "configuration error"); n != 1 {
				t.Errorf("%s: %d configuration error lines, want one", c.name, n)
			}
		}
	})
}

// Records that fail on either side of the hop are dead-lettered as they
// were before it: one without a customer fails its group key before the
// hop, one whose amount is not a number fails the sum behind it; each
// dead letter keeps its order id as key, no header of the hop, and names
// by lineage the input it is. The sums are exact.
func TestRepartitionDeadLetters(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, dlq, group := itest.Unique("hopdead-in"), itest.Unique("hopdead-out"), itest.Unique("hopdead-dlq"), itest.Unique("hopdead-group")
		tg.NewTopics(t, 4, in, out, dlq)
		var recs []*kgo.Record
		want := map[string]int{}
		for i := range 300 {
			c := fmt.Sprintf("cust-%d", i%3)
			v := fmt.Sprintf(`{"customer_id":%q,"amount":%d}`, c, i)
			switch i % 25 {
			case 7:
				v = fmt.Sprintf(`{"amount":%d}`, i)
			case 11:
				v = fmt.Sprintf(`{"customer_id":%q,"amount":"many"}`, c)
			default:
				want[c] += i
			}
			recs = append(recs, &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "order-%d", i), Value: []byte(v)})
		}
		tg.ProduceSync(t, recs)
		byOffset := map[record.Source]*kgo.Record{}
		for _, r := range recs {
			byOffset[record.Source{Topic: in, Partition: r.Partition, Offset: r.Offset}] = r
		}
		p := tg.StartBinary(t, group, group+"-1", in, out, byCustomer(t.TempDir(), "partition", []string{"aggregate"},
			map[string]string{"PROCESSOR_AGGREGATE_FUNCTION": "sum", "PROCESSOR_AGGREGATE_FIELD": ".amount"}), itest.DeadLettered(dlq))
		tg.WaitCaughtUp(t, group, in)
		tg.WaitHopCaughtUp(t, group, state.RepartitionTopic(group, "aggregate"))
		p.Terminate(t)

		final := map[string]int{}
		for _, r := range tg.ReadAll(t, out, true) {
			var v struct{ Value int }
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("output %s: %v", r.Value, err)
			}
			final[string(r.Key)] = v.Value
		}
		for c, sum := range want {
			if final[c] != sum {
				t.Errorf("customer %s: sum %d, want %d", c, final[c], sum)
			}
		}
		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != 24 {
			t.Errorf("%d dead letters, want 24", len(dead))
		}
		for _, d := range dead {
			src, ok := record.Lineage(d.Headers)
			if !ok || src.Topic != in {
				t.Fatalf("dead letter %s names input %v (%v)", d.Value, src, ok)
			}
			if itest.HeaderValue(d, "processor.repartition.key") != "" || itest.HeaderValue(d, "processor.repartition.topic") != "" {
				t.Errorf("dead letter %s carries the hop's headers", d.Value)
			}
			if orig := byOffset[src]; orig == nil || string(orig.Key) != string(d.Key) || string(orig.Value) != string(d.Value) {
				t.Errorf("dead letter %s keyed %q names input %v, which is %v", d.Value, d.Key, src, orig)
			}
		}
	})
}
