package windowed

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/state"
)

// closeByCustomerRef is the reference of a count by .customer_id in
// tumbling windows of size over orders none of which is late: per
// "<customer>@<start>", the count and the inputs ("<topic>/<partition>/
// <offset>") counted.
func closeByCustomerRef(in []*kgo.Record, size int64) (map[string]int, map[string]map[string]bool) {
	counts, srcs := map[string]int{}, map[string]map[string]bool{}
	for _, r := range in {
		var v struct {
			Customer string `json:"customer_id"`
		}
		_ = json.Unmarshal(r.Value, &v)
		ts := r.Timestamp.UnixMilli()
		k := fmt.Sprintf("%s@%d", v.Customer, ts-ts%size)
		counts[k]++
		if srcs[k] == nil {
			srcs[k] = map[string]bool{}
		}
		srcs[k][fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = true
	}
	return counts, srcs
}

// EMIT=close behind the repartition hop, through the processor: orders
// keyed by order id over 4 partitions, counted by .customer_id in
// 1-minute windows with a 10-minute grace (covering the skew of the input
// partitions, docs/state.md "Stream time"), two instances (a rebalance),
// one SIGKILLed and started again, a fifth of the transactions aborted.
// Then one order per customer an hour on closes every window, and orders
// from then on but stamped in the first minutes are late. Each
// (customer, window) has exactly one final row, its count exact, naming
// by its lineage one of the window's orders (an input record, never the
// repartition topic's); every late order is in the late topic once,
// naming itself; eoscheck -check windows -group-by finds the run clean.
func TestRepartitionWindowsClose(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, late, group := itest.Unique("hopclose-in"), itest.Unique("hopclose-out"), itest.Unique("hopclose-late"), itest.Unique("hopclose-group")
		tg.NewTopics(t, 4, in, out, late)
		rnd := rand.New(rand.NewPCG(40, 6))
		base := itest.StampedBase()
		order := func(i int, c string, ts time.Time) *kgo.Record {
			return itest.Stamped(in, fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"customer_id":%q,"order":%d}`, c, i), ts)
		}
		var data []*kgo.Record
		for i := range 1200 {
			data = append(data, order(i, fmt.Sprintf("c%d", rnd.IntN(6)), base.Add(time.Duration(i)*250*time.Millisecond)))
		}
		set := map[string]string{"PROCESSOR_AGGREGATE_WINDOW": "1m", "PROCESSOR_AGGREGATE_GRACE": "10m", "PROCESSOR_AGGREGATE_EMIT": "close"}
		lateTo := func(inst *launch.Instance) { inst.Extra = append(inst.Extra, "PROCESSOR_LATE_TOPIC="+late) }
		cfg1, cfg2 := byCustomer(t.TempDir(), "partition", []string{"aggregate"}, set), byCustomer(t.TempDir(), "partition", []string{"aggregate"}, set)
		hop := state.RepartitionTopic(group, "aggregate")
		p1 := tg.StartBinary(t, group, group+"-1", in, out, cfg1, lateTo)
		tg.ProduceStamped(t, data[:400])
		itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
		p2 := tg.StartBinary(t, group, group+"-2", in, out, cfg2, lateTo)
		tg.ProduceStamped(t, data[400:800])
		p1.Kill(t)
		p1 = tg.StartBinary(t, group, group+"-1", in, out, cfg1, lateTo)
		tg.ProduceStamped(t, data[800:])
		settle := func() {
			tg.WaitCaughtUp(t, group, in)
			tg.WaitHopCaughtUp(t, group, hop)
		}
		settle()
		var flush, lates []*kgo.Record
		for c := range 6 {
			flush = append(flush, order(2000+c, fmt.Sprintf("c%d", c), base.Add(time.Hour)))
		}
		tg.ProduceStamped(t, flush)
		settle()
		for i := range 12 {
			lates = append(lates, order(3000+i, fmt.Sprintf("c%d", i%6), base.Add(time.Duration(rnd.IntN(300))*time.Second)))
		}
		tg.ProduceStamped(t, lates)
		settle()
		p1.Terminate(t)
		p2.Terminate(t)

		committed := tg.ReadAll(t, in, true)
		byKey := map[string]*kgo.Record{}
		for _, r := range committed {
			byKey[string(r.Key)] = r
		}
		for _, rs := range [][]*kgo.Record{data, lates} {
			for i, r := range rs {
				rs[i] = byKey[string(r.Key)] // with its partition and offset
			}
		}
		checkCloseByCustomer(t, tg, out, late, data, lates)
		tg.AuditWith(t, check.Source{Inputs: []string{in}, Outputs: []string{out, late}, Group: group, Windows: true, GroupBy: check.GroupPath{"customer_id"}},
			check.Options{ExpectAll: true, GroupBy: check.GroupPath{"customer_id"},
				Windows: &check.Windows{Size: time.Minute, Grace: 10 * time.Minute, LateTopic: late}})
	})
}

// checkCloseByCustomer checks the final rows of out against the
// reference of data, and that late holds each of lates once.
func checkCloseByCustomer(t *testing.T, tg *itest.Target, out, late string, data, lates []*kgo.Record) {
	t.Helper()
	size := time.Minute.Milliseconds()
	counts, srcs := closeByCustomerRef(data, size)
	seen := map[string]int{}
	for _, r := range tg.ReadAll(t, out, true) {
		k := string(r.Key)
		seen[k]++
		var v struct {
			Value int `json:"value"`
		}
		_ = json.Unmarshal(r.Value, &v)
		lin := lineageOf(r)
		if v.Value != counts[k] || !srcs[k][lin] || seen[k] != 1 {
			t.Errorf("window %s: row %d of count %d naming %s; want one, of count %d, naming one of its orders", k, seen[k], v.Value, lin, counts[k])
		}
	}
	for k := range counts {
		if seen[k] == 0 {
			t.Errorf("window %s: no final row", k)
		}
	}
	want := map[string]bool{}
	for _, r := range lates {
		want[fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = true
	}
	got := map[string]int{}
	for _, r := range tg.ReadAll(t, late, true) {
		got[lineageOf(r)]++
	}
	for lin, n := range got {
		if n != 1 || !want[lin] {
			t.Errorf("the late topic holds %s %d times; want each late order once", lin, n)
		}
	}
	if len(got) != len(want) || len(counts) < 20 {
		t.Errorf("%d late records, want %d; %d windows", len(got), len(want), len(counts))
	}
	t.Logf("%s: %d orders, %d windows closed, %d late", tg.Name, len(data), len(counts), len(lates))
}

// lineageOf is r's processor.source header, "<topic>/<partition>/<offset>".
func lineageOf(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == record.HeaderSource {
			return strings.TrimSpace(string(h.Value))
		}
	}
	return ""
}
