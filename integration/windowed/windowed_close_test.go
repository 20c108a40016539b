package windowed

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/record"
)

// finalRows are a run's final rows by output key (<key>@<start>), each
// as "<value> ts=<ms> src=<partition/offset>", all of them when a key has
// several.
func finalRows(t *testing.T, out []*kgo.Record) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, r := range out {
		src := ""
		for _, h := range r.Headers {
			if h.Key == record.HeaderSource {
				_, src, _ = strings.Cut(string(h.Value), "/")
			}
		}
		got[string(r.Key)] = append(got[string(r.Key)], fmt.Sprintf("%s ts=%d src=%s", r.Value, r.Timestamp.UnixMilli(), src))
	}
	return got
}

// closeRef is the reference of a tumbling windowed count with grace and
// EMIT=close over the committed input (offset order per partition): the
// count of each (key, window) whose end plus grace the partition's
// stream time reached, with the offset of its last input; and the number
// of late inputs.
func closeRef(in []*kgo.Record, size, grace int64) (map[string]string, int) {
	byPart := map[int32][]*kgo.Record{}
	for _, r := range in {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	want, lates := map[string]string{}, 0
	for p, rs := range byPart {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
		stream := int64(-1)
		counts, last := map[string]int{}, map[string]int64{}
		for _, r := range rs {
			ts := r.Timestamp.UnixMilli()
			stream = max(stream, ts)
			start := ts - ts%size
			if start+size+grace <= stream {
				lates++
				continue
			}
			k := fmt.Sprintf("%s@%d", r.Key, start)
			counts[k]++
			last[k] = r.Offset
		}
		for k, n := range counts {
			_, s, _ := strings.Cut(k, "@")
			var start int64
			fmt.Sscan(s, &start)
			if start+size+grace <= stream {
				want[k] = fmt.Sprintf("%d src=%d/%d", n, p, last[k])
			}
		}
	}
	return want, lates
}

// With EMIT=close the same input gives byte for byte the same final rows
// (key, value, timestamp, lineage), read as a backlog or fed live to a
// process killed with SIGKILL and restarted with aborted transactions;
// exactly one per key and window that closed, none for one still open,
// each the count of its inputs that were not late, as a reference model
// of windows computes from the input; and every late input is in the
// late topic once.
func TestWindowsCloseSameUnderKillAndBacklog(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := windowInputs("wclose-in")
		settings := map[string]string{"PROCESSOR_AGGREGATE_WINDOW": "1m", "PROCESSOR_AGGREGATE_GRACE": "20s",
			"PROCESSOR_AGGREGATE_EMIT": "close"}
		live, back := killAndBacklog(t, tg, "wclose", in, settings)
		want, lates := closeRef(tg.ReadAll(t, in[0].Topic, true), time.Minute.Milliseconds(), (20 * time.Second).Milliseconds())
		checkFinalRows(t, live, back, want)
		if len(live.late) != lates || len(back.late) != lates {
			t.Errorf("late records: %d live, %d as a backlog; the reference has %d", len(live.late), len(back.late), lates)
		}
		for _, run := range []windowRun{live, back} { // eoscheck -check windows agrees
			rep := tg.AuditWith(t, check.Source{Inputs: []string{in[0].Topic}, Outputs: []string{run.outTopic, run.lateTopic}, Group: run.group, Windows: true},
				check.Options{ExpectAll: true, Windows: &check.Windows{Size: time.Minute, Grace: 20 * time.Second, LateTopic: run.lateTopic}})
			if w := rep.Windows; w == nil || w.Closed != len(want) || w.Late != lates {
				t.Errorf("eoscheck -check windows of %s: %+v; want %d windows closed, %d late", run.group, w, len(want), lates)
			}
		}
		if lates == 0 || len(want) < 100 {
			t.Errorf("%d late inputs and %d closed windows: the test shows too little", lates, len(want))
		}
		t.Logf("%s: %d inputs, %d closed windows, %d late", tg.Name, len(in), len(want), lates)
	})
}

// checkFinalRows checks the EMIT=close outputs of a run killed and
// restarted live and of the same input drained as a backlog: the two
// agree, and every window of want (closeRef) has exactly one final row,
// the reference's value from the reference's last input.
func checkFinalRows(t *testing.T, live, back windowRun, want map[string]string) {
	t.Helper()
	a, b := finalRows(t, live.out), finalRows(t, back.out)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("live, killed and restarted, %d final rows differ from the backlog's %d", len(a), len(b))
	}
	bad := 0
	for k, rows := range b {
		var v struct {
			Value int `json:"value"`
		}
		_, src, _ := strings.Cut(rows[0], " src=")
		if err := json.Unmarshal([]byte(rows[0][:strings.Index(rows[0], " ts=")]), &v); err != nil {
			t.Fatalf("%s: %v", rows[0], err)
		}
		if got := fmt.Sprintf("%d src=%s", v.Value, src); len(rows) != 1 || got != want[k] {
			if bad++; bad <= 5 {
				t.Errorf("window %s: final rows %v, want one: %q", k, rows, want[k])
			}
		}
	}
	for k, w := range want {
		if _, ok := b[k]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("window %s (%s): no final row", k, w)
			}
		}
	}
}
