package faults

import (
	"strconv"
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"

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
			ok = itest.HeaderValue(r, record.HeaderSource) == v
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
	tg := itest.NewFake(t)
	for _, form := range []string{"compact", "legacy"} {
		t.Run(form, func(t *testing.T) {
			a, b := itest.Input{Topic: itest.Unique("lin-a"), N: 1500, Keys: 30}, itest.Input{Topic: itest.Unique("lin-b"), N: 500, Keys: 10}
			out, group := itest.Unique("lin-out"), itest.Unique("lin-group")
			tg.NewTopics(t, 3, a.Topic, b.Topic, out)
			tg.Produce(t, a, 0, a.N)
			tg.Produce(t, b, 0, b.N)
			o := itest.InstanceOpts{Group: group, TxnID: group + "-a", Topics: []string{a.Topic, b.Topic}, Out: out, MaxRecords: 400}
			if form != "compact" {
				o.Configure = lineageForm(form)
			}
			in := tg.Start(t, o)
			tg.WaitCaughtUp(t, group, a.Topic, in)
			tg.WaitCaughtUp(t, group, b.Topic, in)
			in.Stop(t)
			recs := tg.ReadAll(t, out, true)
			if len(recs) != a.N+b.N {
				t.Errorf("%d outputs, want %d", len(recs), a.N+b.N)
			}
			checkLineageForm(t, form, recs, a.Topic, b.Topic)
			tg.Audit(t, group, []string{a.Topic, b.Topic}, []string{out})
		})
	}
}

// A processor chained after one that writes the legacy headers replaces
// them with its own compact lineage, naming its own input, and eoscheck
// audits the second leg.
func TestLineageRestampedByChainedProcessor(t *testing.T) {
	t.Parallel()
	tg := itest.NewFake(t)
	in := itest.Input{Topic: itest.Unique("chain-in"), N: 1000, Keys: 20}
	mid, out := itest.Unique("chain-mid"), itest.Unique("chain-out")
	g1, g2 := itest.Unique("chain-g1"), itest.Unique("chain-g2")
	tg.NewTopics(t, 3, in.Topic, mid, out)
	tg.Produce(t, in, 0, in.N)
	first := tg.Start(t, itest.InstanceOpts{Group: g1, TxnID: g1 + "-a", Topics: []string{in.Topic}, Out: mid, Configure: lineageForm("legacy")})
	tg.WaitCaughtUp(t, g1, in.Topic, first)
	first.Stop(t)
	second := tg.Start(t, itest.InstanceOpts{Group: g2, TxnID: g2 + "-a", Topics: []string{mid}, Out: out})
	tg.WaitCaughtUp(t, g2, mid, second)
	second.Stop(t)
	recs := tg.ReadAll(t, out, true)
	itest.CheckExactlyOnce(t, in, recs)
	checkLineageForm(t, "compact", recs, mid)
	tg.Audit(t, g2, []string{mid}, []string{out})
}
