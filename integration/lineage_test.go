package integration

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/record"
)

// lineageForm sets PROCESSOR_LINEAGE_HEADERS of an instance.
func lineageForm(form string) func(*config.Config) {
	return func(c *config.Config) { c.LineageHeaders = form }
}

// checkLineageForm asserts that every record of out carries lineage in
// form only (compact: the one processor.source header; legacy: the three
// processor.source.* headers), naming an input of topics, and that each
// input offset is named once per topic.
func checkLineageForm(t *testing.T, form string, out []*kgo.Record, topics ...string) {
	t.Helper()
	want := map[string]bool{record.HeaderSource: form == "compact", record.HeaderSourceTopic: form == "legacy",
		record.HeaderSourcePartition: form == "legacy", record.HeaderSourceOffset: form == "legacy"}
	bad, seen := 0, map[check.Input]bool{}
	for _, r := range out {
		n := map[string]int{}
		for _, h := range r.Headers {
			n[h.Key]++
		}
		src, ok := check.Lineage(r)
		for key, on := range want {
			if (on && n[key] != 1) || (!on && n[key] != 0) {
				ok = false
			}
		}
		if form == "compact" && ok {
			v := src.Topic + "/" + strconv.Itoa(int(src.Partition)) + "/" + strconv.FormatInt(src.Offset, 10)
			ok = headerValue(r, record.HeaderSource) == v
		}
		known := false
		for _, tp := range topics {
			known = known || src.Topic == tp
		}
		if !ok || !known || seen[src] {
			if bad++; bad <= 3 {
				t.Errorf("%s: output %s/%d@%d has lineage %+v (valid %v) in headers %v", form, r.Topic, r.Partition, r.Offset, src, ok, r.Headers)
			}
		}
		seen[src] = true
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d outputs without the lineage of their form", form, bad, len(out))
	}
}

// The processor's outputs carry the compact processor.source header by
// default and the three legacy headers with PROCESSOR_LINEAGE_HEADERS=
// legacy, naming the input topic exactly when there are two; eoscheck
// audits either as exactly once.
func TestLineageFormsAudited(t *testing.T) {
	t.Parallel()
	tg := newFake(t)
	for _, form := range []string{"compact", "legacy"} {
		t.Run(form, func(t *testing.T) {
			a, b := input{topic: unique("lin-a"), n: 1500, keys: 30}, input{topic: unique("lin-b"), n: 500, keys: 10}
			out, group := unique("lin-out"), unique("lin-group")
			tg.createTopics(t, 3, a.topic, b.topic, out)
			tg.produce(t, a, 0, a.n)
			tg.produce(t, b, 0, b.n)
			o := instanceOpts{group: group, txnID: group + "-a", topics: []string{a.topic, b.topic}, out: out, maxRecords: 400}
			if form != "compact" {
				o.configure = lineageForm(form)
			}
			in := tg.start(t, o)
			tg.waitCaughtUp(t, group, a.topic, in)
			tg.waitCaughtUp(t, group, b.topic, in)
			in.stop(t)
			recs := tg.readAll(t, out, true)
			if len(recs) != a.n+b.n {
				t.Errorf("%d outputs, want %d", len(recs), a.n+b.n)
			}
			checkLineageForm(t, form, recs, a.topic, b.topic)
			tg.audit(t, group, []string{a.topic, b.topic}, []string{out})
		})
	}
}

// A processor chained after one that writes the legacy headers replaces
// them with its own compact lineage, naming its own input, and eoscheck
// audits the second leg.
func TestLineageRestampedByChainedProcessor(t *testing.T) {
	t.Parallel()
	tg := newFake(t)
	in := input{topic: unique("chain-in"), n: 1000, keys: 20}
	mid, out := unique("chain-mid"), unique("chain-out")
	g1, g2 := unique("chain-g1"), unique("chain-g2")
	tg.createTopics(t, 3, in.topic, mid, out)
	tg.produce(t, in, 0, in.n)
	first := tg.start(t, instanceOpts{group: g1, txnID: g1 + "-a", topics: []string{in.topic}, out: mid, configure: lineageForm("legacy")})
	tg.waitCaughtUp(t, g1, in.topic, first)
	first.stop(t)
	second := tg.start(t, instanceOpts{group: g2, txnID: g2 + "-a", topics: []string{mid}, out: out})
	tg.waitCaughtUp(t, g2, mid, second)
	second.stop(t)
	recs := tg.readAll(t, out, true)
	checkExactlyOnce(t, in, recs)
	checkLineageForm(t, "compact", recs, mid)
	tg.audit(t, g2, []string{mid}, []string{out})
}
