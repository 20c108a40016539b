package windowed

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/record"
)

// byInput gathers a run's committed outputs and late records by the
// input they came from (their lineage header), as "<key> <value>" and
// "late <by.ms>", sorted.
func byInput(t *testing.T, out, late []*kgo.Record) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	src := func(r *kgo.Record) string {
		for _, h := range r.Headers {
			if h.Key == record.HeaderSource {
				_, rest, _ := strings.Cut(string(h.Value), "/") // topic/partition/offset: the topic differs by run
				return rest
			}
		}
		t.Fatalf("record %s has no lineage header", r.Value)
		return ""
	}
	for _, r := range out {
		var v struct {
			Value json.Number `json:"value"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %s: %v", r.Value, err)
		}
		got[src(r)] = append(got[src(r)], string(r.Key)+" "+v.Value.String())
	}
	for _, r := range late {
		by := ""
		for _, h := range r.Headers {
			if h.Key == record.HeaderLateBy {
				by = string(h.Value)
			}
		}
		got[src(r)] = append(got[src(r)], "late "+by)
	}
	for _, o := range got {
		slices.Sort(o)
	}
	return got
}

// The same input through a windowed count with grace and a late topic
// gives the same outputs and late records, input by input: read as a
// backlog by one process, and fed live to another that is killed with
// SIGKILL half way and restarted, with transactions aborted on purpose.
// The stream time the restart goes on from is the committed one: a
// restart that started it afresh would count late records into their
// closed windows.
func TestWindowsSameUnderKillAndBacklog(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := windowInputs("wdet-in")
		settings := map[string]string{"PROCESSOR_AGGREGATE_WINDOW": "1m", "PROCESSOR_AGGREGATE_GRACE": "20s"}
		live, back := killAndBacklog(t, tg, "wdet", in, settings)
		a := byInput(t, live.out, live.late)
		b := byInput(t, back.out, back.late)
		lates, bad := 0, 0
		for src, w := range b {
			if len(w) > 0 && strings.HasPrefix(w[0], "late") {
				lates++
			}
			if fmt.Sprint(a[src]) != fmt.Sprint(w) {
				if bad++; bad <= 5 {
					t.Errorf("input %s: live, killed and restarted gave %v; as a backlog %v", src, a[src], w)
				}
			}
		}
		if len(a) != len(in) || len(b) != len(in) {
			t.Errorf("outputs of %d inputs live and %d as a backlog, want %d", len(a), len(b), len(in))
		}
		if lates == 0 {
			t.Error("no input was late: the test shows nothing of lateness")
		}
		t.Logf("%s: %d inputs, %d of them late", tg.Name, len(in), lates)
	})
}

// windowInputs are 3000 records of 20 keys, 200 ms apart, a quarter of
// them up to 100 s behind, to a topic named after prefix (set by
// killAndBacklog).
func windowInputs(prefix string) []*kgo.Record {
	topic := itest.Unique(prefix)
	r := rand.New(rand.NewPCG(40, 4))
	base := itest.StampedBase()
	var in []*kgo.Record
	for i := range 3000 {
		ts := base.Add(time.Duration(i) * 200 * time.Millisecond)
		if r.IntN(4) == 0 {
			ts = ts.Add(-time.Duration(r.IntN(100)) * time.Second)
		}
		in = append(in, itest.Stamped(topic, "k"+strconv.Itoa(r.IntN(20)), fmt.Sprintf(`{"i":%d}`, i), ts))
	}
	return in
}

// windowRun is what one run of killAndBacklog committed: its outputs and
// late records, and the names of its group and topics.
type windowRun struct {
	out, late                  []*kgo.Record
	group, outTopic, lateTopic string
}

// killAndBacklog runs the aggregate with settings over in (all of one
// topic, created with 4 partitions) twice: fed live, in steps, to a
// process killed with SIGKILL two thirds in and restarted, with
// transactions aborted on purpose; and read as a backlog by another
// group. Each run writes its late records to a late topic.
func killAndBacklog(t *testing.T, tg *itest.Target, prefix string, in []*kgo.Record, settings map[string]string) (live, back windowRun) {
	return killAndBacklogChain(t, tg, prefix, in, []string{"aggregate"}, settings)
}

// killAndBacklogChain is killAndBacklog with the transform chain chain.
func killAndBacklogChain(t *testing.T, tg *itest.Target, prefix string, in []*kgo.Record, chain []string, settings map[string]string) (live, back windowRun) {
	topic, group := in[0].Topic, itest.Unique(prefix+"-group")
	liveOut, liveLate, backOut, backLate := itest.Unique(prefix+"-live"), itest.Unique(prefix+"-live-late"), itest.Unique(prefix+"-back"), itest.Unique(prefix+"-back-late")
	tg.NewTopics(t, 4, topic, liveOut, liveLate, backOut, backLate)
	lateTo := func(topic string) func(*launch.Instance) {
		return func(inst *launch.Instance) { inst.Extra = append(inst.Extra, "PROCESSOR_LATE_TOPIC="+topic) }
	}
	static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
	liveCfg := itest.Stateful(t.TempDir(), "partition", "0.2", chain, settings)
	third := len(in) / 3
	p1 := tg.StartBinary(t, group, group+"-1", topic, liveOut, liveCfg, lateTo(liveLate), static)
	for i := 0; i < 2*third; i += 100 {
		tg.ProduceStamped(t, in[i:i+100])
		if i == third {
			itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
		}
		time.Sleep(20 * time.Millisecond)
	}
	p1.Kill(t)
	p2 := tg.StartBinary(t, group, group+"-1", topic, liveOut, liveCfg, lateTo(liveLate), static)
	for i := 2 * third; i < len(in); i += 100 {
		tg.ProduceStamped(t, in[i:min(i+100, len(in))])
		time.Sleep(20 * time.Millisecond)
	}
	tg.WaitCaughtUp(t, group, topic)
	p2.Terminate(t)

	bg := group + "-backlog"
	p3 := tg.StartBinary(t, bg, bg+"-1", topic, backOut, itest.Stateful(t.TempDir(), "partition", "0", chain, settings), lateTo(backLate))
	tg.WaitCaughtUp(t, bg, topic)
	p3.Terminate(t)
	return windowRun{tg.ReadAll(t, liveOut, true), tg.ReadAll(t, liveLate, true), group, liveOut, liveLate},
		windowRun{tg.ReadAll(t, backOut, true), tg.ReadAll(t, backLate, true), bg, backOut, backLate}
}
