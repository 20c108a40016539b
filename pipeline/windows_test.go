package pipeline

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// windowRef is the reference of a hopping windowed count with grace, by
// record key, in one partition's offset order: per input, the outputs
// "<key>@<start> <count>" in window order, or "late" when every window
// of the record had closed by the stream time.
func windowRef(inputs []*kgo.Record, size, adv, grace int64) map[string][]string {
	out := map[string][]string{}
	stream := map[int32]int64{}
	counts := map[string]int{}
	for _, r := range inputs { // in offset order per partition
		ts := r.Timestamp.UnixMilli()
		s, ok := stream[r.Partition]
		if !ok || ts > s {
			s = ts
		}
		stream[r.Partition] = s
		src := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
		var res []string
		for start := ts - ts%adv - size + adv; start <= ts; start += adv { // timestamps are positive here
			if start+size+grace <= s {
				continue
			}
			k := fmt.Sprintf("%d|%s@%d", r.Partition, r.Key, start)
			counts[k]++
			res = append(res, fmt.Sprintf("%s@%d %d", r.Key, start, counts[k]))
		}
		if res == nil {
			res = []string{"late"}
		}
		out[src] = res
	}
	return out
}

// windowOutputs reads the committed outputs and late records of a run,
// by the input they came from (the lineage header), in the reference's
// form.
func windowOutputs(t *testing.T, e *loopEnv, out, late string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, r := range e.read(out, true) {
		src := sourceOf(r)
		var v struct {
			Value int `json:"value"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %s: %v", r.Value, err)
		}
		got[src] = append(got[src], fmt.Sprintf("%s %d", r.Key, v.Value))
	}
	for _, r := range e.read(late, true) {
		src := sourceOf(r)
		got[src] = append(got[src], "late")
	}
	for _, o := range got {
		slices.Sort(o) // the windows of one input are written in order, to the partitions of their keys
	}
	return got
}

// sourceOf is "<partition>/<offset>" of r's lineage header
// (topic/partition/offset).
func sourceOf(r *kgo.Record) string {
	v, _ := header(r, record.HeaderSource)
	_, rest, _ := strings.Cut(v, "/")
	return rest
}

// A hopping windowed count with grace gives every input the same outputs
// (the same counts under the same keys, or the late topic) whatever the
// batching: all the input at once as a backlog, or fed live in small
// transactions with aborts, two workers and a restart half way; and both
// agree with the reference.
func TestWindowsIndependentOfBatching(t *testing.T) {
	e := newLoopEnv(t)
	e.c.CreateTopics(t, loopPartitions, nil, "changelog", "late", "out2", "late2")
	r := rand.New(rand.NewPCG(7, 7))
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Minute)
	recs := func(n, from int) []*kgo.Record {
		out := make([]*kgo.Record, n)
		for i := range out {
			ts := base.Add(time.Duration(from+i) * 700 * time.Millisecond)
			if r.IntN(4) == 0 {
				ts = ts.Add(-time.Duration(r.IntN(150)) * time.Second) // late, within the grace or not
			}
			out[i] = &kgo.Record{Topic: e.in, Partition: int32(r.IntN(loopPartitions)), Key: []byte("k" + strconv.Itoa(r.IntN(4))),
				Value: []byte("{}"), Timestamp: ts}
		}
		return out
	}
	manual := kgo.RecordPartitioner(kgo.ManualPartitioner())
	set := map[string]string{"WINDOW": "1m", "WINDOW_ADVANCE": "20s", "GRACE": "30s"}
	build := func() *transform.Chain { return settingsChain(t, set, "aggregate") }

	e.produceInputs(recs(300, 0), manual)
	small := Options{State: newMemState(), MaxRecordsPerTxn: 5, Lineage: true, LateTopic: "late", Chains: []*transform.Chain{build()},
		InjectAbort: func(seq uint64) bool { return seq%3 == 0 }}
	run := e.start("small", "t-small", build(), small)
	eventually(t, 30*time.Second, "the first part committed", run, func() bool { return e.caughtUp("small") })
	run.stop(t, 10*time.Second)
	small.Chains = []*transform.Chain{build()}
	run = e.start("small", "t-small", build(), small)
	for i := range 5 { // live, while it runs
		e.produceInputs(recs(60, 300+60*i), manual)
		time.Sleep(50 * time.Millisecond)
	}
	eventually(t, 30*time.Second, "the rest committed", run, func() bool { return e.caughtUp("small") })
	run.stop(t, 10*time.Second)

	run = e.start("large", "t-large", build(), Options{State: newMemState(), MaxRecordsPerTxn: 100000, Lineage: true, LateTopic: "late2", OutputTopic: "out2"})
	eventually(t, 30*time.Second, "every input committed", run, func() bool { return e.caughtUp("large") })
	run.stop(t, 10*time.Second)

	want := windowRef(e.inputs, time.Minute.Milliseconds(), (20 * time.Second).Milliseconds(), (30 * time.Second).Milliseconds())
	for _, w := range want {
		slices.Sort(w)
	}
	lates := 0
	for _, w := range want {
		if w[0] == "late" {
			lates++
		}
	}
	if lates == 0 {
		t.Fatal("no input is late: the test shows nothing of lateness")
	}
	for _, c := range []struct{ name, out, late string }{{"small", e.out, "late"}, {"large", "out2", "late2"}} {
		got := windowOutputs(t, e, c.out, c.late)
		bad := 0
		for src, w := range want {
			if fmt.Sprint(got[src]) != fmt.Sprint(w) {
				if bad++; bad <= 5 {
					t.Errorf("%s: input %s gave %v, want %v", c.name, src, got[src], w)
				}
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: outputs of %d inputs, want %d", c.name, len(got), len(want))
		}
	}
	t.Logf("%d inputs, %d late", len(want), lates)
}
