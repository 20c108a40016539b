package pipeline

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/dedupe"
)

// settingsChain builds the chain of the named built-ins with settings by
// name ("WINDOW"), closed when t ends.
func settingsChain(t *testing.T, set map[string]string, names ...string) *transform.Chain {
	t.Helper()
	var entries []transform.Entry
	for _, n := range names {
		entries = append(entries, transform.Entry{Name: n})
	}
	c, err := transform.Default.Build(entries, func(_ transform.Entry, s string) (string, bool) {
		v, ok := set[s]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// lateHeader is the value of r's header key, or "".
func lateHeader(r *kgo.Record, key string) string {
	v, _ := header(r, key)
	return v
}

// Dedupe judges each record by its own timestamp within the grace behind
// the stream time: a duplicate behind the partition's newest record, but
// within the grace, is filtered; one older than the grace is late, goes
// to the late topic with the processor.late.* headers and counts in
// processor_records_late_total{store}, once, whatever the batching (one
// record a transaction with aborts, or all at once).
func TestDedupeLateWithinGrace(t *testing.T) {
	e := newLoopEnv(t)
	e.c.CreateTopics(t, loopPartitions, nil, "changelog", "late", "out2", "late2")
	base := time.Now().Add(-10 * time.Hour).Truncate(time.Second)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	in := []struct {
		id   string
		ts   time.Time
		pass bool // reaches the output
		late bool // goes to the late topic
	}{
		{"a", at(0), true, false},
		{"b", at(2 * time.Hour), true, false},
		{"a", at(10 * time.Minute), false, false}, // behind the newest by 1h50m, within the 3h grace: a duplicate
		{"c", at(-5 * time.Hour), false, true},    // 7h behind: late
		{"a", at(90 * time.Minute), true, false},  // past a's hour: passes, remembered anew
		{"a", at(100 * time.Minute), false, false},
		{"b", at(-90 * time.Minute), false, true}, // late, though b was seen: never judged
		{"d", at(-50 * time.Minute), true, false}, // 2h50m behind: within the grace
	}
	var recs []*kgo.Record
	for i, c := range in {
		recs = append(recs, &kgo.Record{Topic: e.in, Partition: 0, Key: []byte(c.id), Value: []byte(strconv.Itoa(i)), Timestamp: c.ts})
	}
	e.produceInputs(recs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	set := map[string]string{"WINDOW": "1h", "GRACE": "3h"}
	for _, c := range []struct {
		group, out, late string
		o                Options
	}{
		{"one", e.out, "late", Options{MaxRecordsPerTxn: 1, InjectAbort: func(seq uint64) bool { return seq%2 == 0 }}},
		{"all", "out2", "late2", Options{MaxRecordsPerTxn: 1000}},
	} {
		o := c.o
		o.State, o.OutputTopic, o.LateTopic = newMemState(), c.out, c.late
		run := e.start(c.group, "t-"+c.group, settingsChain(t, set, "dedupe"), o)
		eventually(t, 30*time.Second, "every input committed", run, func() bool { return e.caughtUp(c.group) })
		run.stop(t, 10*time.Second)
		var passed, late []string
		for _, r := range e.read(c.out, true) {
			passed = append(passed, string(r.Value))
		}
		stream := strconv.FormatInt(at(2*time.Hour).UnixMilli(), 10)
		for _, r := range e.read(c.late, true) {
			late = append(late, string(r.Value))
			i, _ := strconv.Atoi(string(r.Value))
			by := at(2*time.Hour).UnixMilli() - (3 * time.Hour).Milliseconds() - in[i].ts.UnixMilli()
			if lateHeader(r, record.HeaderLateStore) != "dedupe" || lateHeader(r, record.HeaderLateStreamTime) != stream ||
				lateHeader(r, record.HeaderLateBy) != strconv.FormatInt(by, 10) || lateHeader(r, record.HeaderLateWindowStart) != "" {
				t.Errorf("%s: late record %s has headers %v; want store dedupe, stream time %s, late by %d", c.group, r.Value, r.Headers, stream, by)
			}
			if string(r.Key) != in[i].id || !r.Timestamp.Equal(in[i].ts) {
				t.Errorf("%s: late record %s is not its input (key %s, time %s)", c.group, r.Value, r.Key, r.Timestamp)
			}
		}
		slices.Sort(passed) // the outputs' partitions are their keys'
		slices.Sort(late)
		var wantPassed, wantLate []string
		for i, c := range in {
			if c.pass {
				wantPassed = append(wantPassed, strconv.Itoa(i))
			}
			if c.late {
				wantLate = append(wantLate, strconv.Itoa(i))
			}
		}
		if strings.Join(passed, ",") != strings.Join(wantPassed, ",") || strings.Join(late, ",") != strings.Join(wantLate, ",") {
			t.Errorf("%s: passed %v and late %v; want %v and %v", c.group, passed, late, wantPassed, wantLate)
		}
		if n := testutil.ToFloat64(run.pm.Late.WithLabelValues("dedupe")); n != float64(len(wantLate)) {
			t.Errorf("%s: processor_records_late_total{store=dedupe} = %v, want %d", c.group, n, len(wantLate))
		}
	}
}
