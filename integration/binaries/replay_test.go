package binaries

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/cmd/eoscheck/check"
	"github.com/streamproc/processor/record"
)

// replayInput is input record i of TestBinaryReplayUnderSIGKILL: JSON, one
// in four "bad" (dead-lettered by the first chain, fine for the fixed
// one), one in twenty "forever" bad (dead-lettered by both), and one bad
// record late in the run carrying the crash marker.
func replayInput(i, n int) (value string, bad, forever bool) {
	switch {
	case i%20 == 3:
		return fmt.Sprintf(`{"seq":%d,"bad":"forever"}`, i), true, true
	case i == n-n/10+1:
		return fmt.Sprintf(`{"seq":%d,"bad":true,"note":"crash-here"}`, i), true, false
	case i%4 == 1:
		return fmt.Sprintf(`{"seq":%d,"bad":true}`, i), true, false
	}
	return fmt.Sprintf(`{"seq":%d}`, i), false, false
}

// TestBinaryReplayUnderSIGKILL: a processor dead-letters the records its
// chain fails; `processor replay` with a fixed chain runs them again. The
// first replay is SIGKILLed mid-way (PROCESSOR_TEST_CRASH_ON, on a dead
// letter late in the topic), the second runs to the end and exits 0.
// Then every input has exactly one output, named by its own lineage (the
// original input, not the dead letter), without processor.error headers,
// except the records both chains fail: those have none, and exactly one
// dead letter each that no replay has read yet, counting its replays.
func TestBinaryReplayUnderSIGKILL(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, dlq, group := itest.Unique("replay-in"), itest.Unique("replay-out"), itest.Unique("replay-dlq"), itest.Unique("replay-group")
		tg.NewTopics(t, 2, in, out, dlq)
		const n = 4000
		var recs []*kgo.Record
		for i := range n {
			v, _, _ := replayInput(i, n)
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i%40)), Value: []byte(v)})
		}
		tg.ProduceSync(t, recs)
		inst := tg.BinaryInstance(group, group+"-1", in, out)
		inst.Transforms, inst.OnError, inst.DLQTopic = []string{"jq"}, "dlq", dlq
		inst.Settings = map[string]string{"PROCESSOR_JQ_EXPR": `if .bad then error("bad record") else . end`}
		p := itest.RunBinary(t, group+"-1", inst)
		tg.WaitCaughtUp(t, group, in)
		p.Terminate(t)

		// The chain fixed, but for the "forever" records.
		inst.Settings = map[string]string{"PROCESSOR_JQ_EXPR": `if .bad == "forever" then error("still bad") else . end`}
		inst.Extra = []string{"PROCESSOR_MAX_RECORDS_PER_TXN=50"}
		crashing := inst
		crashing.Extra = append(crashing.Extra, "PROCESSOR_TEST_CRASH_ON=crash-here")
		replayGroup := group + "-replay"
		stdout, stderr, code := runTool(t, crashing, "replay")
		if code != -1 {
			t.Fatalf("the crashing replay: exit %d, want death by SIGKILL\n%s%s", code, stdout, stderr)
		}
		ends := tg.EndOffsets(t, dlq)
		mid := tg.Committed(t, replayGroup, dlq)
		if sum(mid) == 0 || mid[0] >= ends[0] && mid[1] >= ends[1] {
			t.Fatalf("the replay was not killed mid-way: committed %v of %v", mid, ends)
		}
		stdout, stderr, code = runTool(t, inst, "replay")
		if code != 0 || !strings.Contains(stdout, "replayed") {
			t.Fatalf("the second replay: exit %d\n%s%s", code, stdout, stderr)
		}
		checkReplayed(t, tg, in, out, dlq, replayGroup, n)
		stdout, stderr, code = runTool(t, inst, "offsets", "-replay", "-json")
		var shown shownOffsets
		if err := json.Unmarshal([]byte(stdout), &shown); code != 0 || err != nil || shown.Group != replayGroup || len(shown.Partitions) != 2 {
			t.Fatalf("processor offsets -replay -json: exit %d, %v\n%s%s", code, err, stdout, stderr)
		}
		for _, p := range shown.Partitions {
			if want := tg.Committed(t, replayGroup, dlq)[p.Partition]; p.Topic != dlq || p.Committed != want {
				t.Errorf("offsets -replay shows %+v, want %s at %d", p, dlq, want)
			}
		}
		auditReplayed(t, tg, check.Source{Inputs: []string{in}, Outputs: []string{out}, DeadLetters: []string{dlq}, Group: group,
			ReplayGroup: replayGroup}, n/20)
	})
}

// auditReplayed audits the run with eoscheck's replay mode: no anomaly
// but one dead letter for each of the forever bad inputs.
func auditReplayed(t *testing.T, tg *itest.Target, src check.Source, forever int) {
	t.Helper()
	rep := tg.Report(t, src, check.Options{OneToOne: true, ExpectAll: true})
	for a, n := range rep.Counts {
		if want := map[bool]int{true: forever}[a == check.DeadLetter]; n != want {
			t.Errorf("eoscheck: %d %s, want %d:\n%s%v", n, a, want, rep.Table(), rep.Examples[a])
		}
	}
	if rep.Replayed == 0 {
		t.Errorf("eoscheck counted no dead letter replayed:\n%s", rep.Table())
	}
}

func sum(m map[int32]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// checkReplayed judges the outputs and dead letters after the replays,
// by lineage: each input's outputs exactly once, or (records the fixed
// chain still fails) exactly one dead letter left unread by the replay
// group.
func checkReplayed(t *testing.T, tg *itest.Target, in, out, dlq, replayGroup string, n int) {
	t.Helper()
	outs := map[int64]int{}
	for _, r := range tg.ReadAll(t, out, true) {
		src, ok := record.Lineage(r.Headers)
		if !ok || src.Topic != in {
			t.Fatalf("an output names %+v (ok %v), want an input of %s", src, ok, in)
		}
		for _, h := range r.Headers {
			if record.IsDeadLetterHeader(h.Key) {
				t.Fatalf("output of %+v carries %s", src, h.Key)
			}
		}
		outs[offsetKey(src)]++
	}
	read := tg.Committed(t, replayGroup, dlq)
	left := map[int64]int{}
	for _, r := range tg.ReadAll(t, dlq, true) {
		src, ok := record.Lineage(r.Headers)
		if !ok || src.Topic != in {
			t.Fatalf("a dead letter names %+v (ok %v), want an input of %s", src, ok, in)
		}
		if r.Offset >= read[r.Partition] {
			left[offsetKey(src)]++
			if replays := itest.HeaderValue(r, record.HeaderErrorReplays); replays == "" || !strings.Contains(itest.HeaderValue(r, record.HeaderError), "still bad") {
				t.Errorf("dead letter %s/%d/%d left: replays %q, error %q", dlq, r.Partition, r.Offset, replays, itest.HeaderValue(r, record.HeaderError))
			}
		}
	}
	bad := 0
	for _, r := range tg.ReadAll(t, in, true) {
		var seq int
		if _, err := fmt.Sscanf(string(r.Value), `{"seq":%d`, &seq); err != nil {
			t.Fatalf("input %q: %v", r.Value, err)
		}
		_, _, forever := replayInput(seq, n)
		k := offsetKey(record.Source{Topic: in, Partition: r.Partition, Offset: r.Offset})
		wantOut, wantLeft := 1, 0
		if forever {
			wantOut, wantLeft = 0, 1
		}
		if outs[k] != wantOut || left[k] != wantLeft {
			bad++
			if bad <= 5 {
				t.Errorf("input %s/%d/%d (%s): %d outputs, %d dead letters left; want %d and %d", in, r.Partition, r.Offset, r.Value, outs[k], left[k], wantOut, wantLeft)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d inputs not exactly once", bad, n)
	}
}

func offsetKey(s record.Source) int64 { return int64(s.Partition)<<40 | s.Offset }
