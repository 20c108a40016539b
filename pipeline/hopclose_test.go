package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// hopRun is a pipeline run of a windowed count by a field, EMIT=close,
// behind a repartition hop: its group, outputs and late topic.
type hopRun struct {
	group, hop, out, late string
	o                     Options
	m                     *state.Manager
	run                   *loopRun
}

// startHop starts (or starts again) r's pipeline with the hop: the
// session consumes the repartition topic too, and the producer keeps the
// partitions the hop and the state set.
func (e *loopEnv) startHop(t *testing.T, r *hopRun, set map[string]string) {
	t.Helper()
	o := r.o
	o.State, o.Lineage, o.LateTopic, o.OutputTopic = realState{r.m}, true, r.late, r.out
	o.InputTopics = []string{e.in, r.hop}
	o.Repartition = &Repartition{Topic: r.hop, Partitions: loopPartitions}
	o.Chains = []*transform.Chain{settingsChain(t, set, "aggregate")}
	r.run = e.startWith(r.group, "t-"+r.group, settingsChain(t, set, "aggregate"), o, func(so *txn.Options) {
		so.Topics = append(so.Topics, r.hop)
		manual := append(r.m.Topics(), r.hop)
		so.ClientOpts = append(so.ClientOpts, kgo.RecordPartitioner(state.Partitioner(kgo.StickyKeyPartitioner(nil), manual)))
	})
}

// hopCaughtUp reports whether r's group committed every record of the
// input and of its repartition topic.
func (e *loopEnv) hopCaughtUp(r *hopRun) bool {
	a, _ := e.c.CaughtUp(e.t, r.group, e.in)
	b, _ := e.c.CaughtUp(e.t, r.group, r.hop)
	return a && b
}

// hopWindowRef is the reference of a count by the field c in tumbling
// windows of size over inputs none of which is late: per "<c>@<start>",
// the count and the inputs ("<partition>/<offset>") counted.
func hopWindowRef(in []*kgo.Record, size int64) (map[string]int, map[string]map[string]bool) {
	counts, srcs := map[string]int{}, map[string]map[string]bool{}
	for _, r := range in {
		var v struct{ C string }
		_ = json.Unmarshal(r.Value, &v)
		ts := r.Timestamp.UnixMilli()
		k := fmt.Sprintf("%s@%d", v.C, ts-ts%size)
		counts[k]++
		if srcs[k] == nil {
			srcs[k] = map[string]bool{}
		}
		srcs[k][fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true
	}
	return counts, srcs
}

// checkHopFinals checks a run's final rows against the reference: one
// per (group key, window), the reference's count, stamped with the
// window's last millisecond, naming one of the window's original inputs
// (never a record of the repartition topic). It returns the rows as
// "<key> <count>".
func checkHopFinals(t *testing.T, e *loopEnv, r *hopRun, counts map[string]int, srcs map[string]map[string]bool, size int64) []string {
	t.Helper()
	var rows []string
	seen := map[string]int{}
	for _, o := range e.read(r.out, true) {
		k := string(o.Key)
		seen[k]++
		var v struct{ Value int }
		if err := json.Unmarshal(o.Value, &v); err != nil {
			t.Fatalf("%s: output %s: %v", r.group, o.Value, err)
		}
		lin, _ := header(o, record.HeaderSource)
		topic, src, _ := strings.Cut(lin, "/")
		_, s, _ := strings.Cut(k, "@")
		var start int64
		fmt.Sscan(s, &start)
		if v.Value != counts[k] || topic != e.in || !srcs[k][src] || o.Timestamp.UnixMilli() != start+size-1 {
			t.Errorf("%s: window %s: count %d lineage %s stamped %d; want count %d, an input of the window, stamped %d",
				r.group, k, v.Value, lin, o.Timestamp.UnixMilli(), counts[k], start+size-1)
		}
		rows = append(rows, fmt.Sprintf("%s %d", k, v.Value))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s: window %s: %d final rows, want one", r.group, k, n)
		}
	}
	for k := range counts {
		if seen[k] == 0 {
			t.Errorf("%s: window %s: no final row", r.group, k)
		}
	}
	return rows
}

// A count by a field in 1-minute windows with EMIT=close, behind a
// repartition hop: every (group key, window) gives exactly one final row,
// the count of its inputs, naming one of them by its original input
// (topic, partition, offset), whatever the batching: in transactions of
// 7 records with every fourth aborted and a restart half way, or of up
// to 100,000; records late by the stream time of their repartition
// partition go to the late topic once each, naming their input. GRACE
// covers the skew of the input partitions (the contract behind a hop,
// docs/state.md), so no record of the first part is late in any run.
func TestCloseBehindHop(t *testing.T) {
	e := newLoopEnv(t)
	rnd := rand.New(rand.NewPCG(40, 2))
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	size := time.Minute.Milliseconds()
	rec := func(i int, c string, ts time.Time) *kgo.Record {
		return &kgo.Record{Topic: e.in, Partition: int32(rnd.IntN(loopPartitions)), Key: fmt.Appendf(nil, "o%d", i),
			Value: fmt.Appendf(nil, `{"c":%q}`, c), Timestamp: ts}
	}
	var data []*kgo.Record
	for i := range 600 {
		ts := base.Add(time.Duration(i)*time.Second - time.Duration(rnd.IntN(20))*time.Second)
		data = append(data, rec(i, fmt.Sprintf("c%d", rnd.IntN(8)), ts))
	}
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	e.produceInputs(data, manual)
	set := map[string]string{"WINDOW": "1m", "GRACE": "30m", "EMIT": "close", "BY": ".c"}
	runs := []*hopRun{
		{group: "small", out: e.out, late: "late", o: Options{MaxRecordsPerTxn: 7, InjectAbort: func(seq uint64) bool { return seq%4 == 0 }}},
		{group: "large", out: "out2", late: "late2", o: Options{MaxRecordsPerTxn: 100000}},
	}
	e.c.CreateTopics(t, loopPartitions, nil, "out2", "late", "late2")
	for _, r := range runs {
		r.hop = state.RepartitionTopic(r.group, "aggregate")
		e.c.CreateTopics(t, loopPartitions, nil, r.hop)
		r.m = e.openRealState(r.group)
		e.startHop(t, r, set)
	}
	small := runs[0]
	eventually(t, 60*time.Second, "part of the input committed", small.run, func() bool { return sumOffsets(e.committedOffsets("small")) > 200 })
	small.run.stop(t, 10*time.Second)
	e.startHop(t, small, set)
	wait := func(what string) {
		for _, r := range runs {
			eventually(t, 90*time.Second, r.group+": "+what, r.run, func() bool { return e.hopCaughtUp(r) })
		}
	}
	wait("the first part committed")
	var flush []*kgo.Record // one per group key, two hours on: every window of the data closes
	for c := range 8 {
		flush = append(flush, rec(1000+c, fmt.Sprintf("c%d", c), base.Add(2*time.Hour)))
	}
	e.produceInputs(flush, manual)
	wait("the flush committed")
	var late []*kgo.Record
	for i := range 20 {
		late = append(late, rec(2000+i, fmt.Sprintf("c%d", rnd.IntN(8)), base.Add(time.Duration(rnd.IntN(600))*time.Second)))
	}
	e.produceInputs(late, manual)
	wait("the late records committed")
	for _, r := range runs {
		r.run.stop(t, 10*time.Second)
	}

	counts, srcs := hopWindowRef(data, size)
	lateWant := map[string]bool{}
	for _, r := range late {
		lateWant[fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = true
	}
	var rows [][]string
	for _, r := range runs {
		rows = append(rows, checkHopFinals(t, e, r, counts, srcs, size))
		got := map[string]int{}
		for _, o := range e.read(r.late, true) {
			lin, _ := header(o, record.HeaderSource)
			got[lin]++
		}
		for lin, n := range got {
			if n != 1 || !lateWant[lin] {
				t.Errorf("%s: late record naming %s %d times; want the late inputs once each", r.group, lin, n)
			}
		}
		if len(got) != len(lateWant) {
			t.Errorf("%s: %d late records, want %d", r.group, len(got), len(lateWant))
		}
	}
	if fmt.Sprint(sorted(rows[0])) != fmt.Sprint(sorted(rows[1])) {
		t.Errorf("the final rows differ between the batchings")
	}
	if len(counts) < 50 {
		t.Errorf("only %d windows: the test shows too little", len(counts))
	}
	t.Logf("%d inputs, %d windows closed, %d late", len(data), len(counts), len(late))
}

// sorted returns s sorted.
func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
