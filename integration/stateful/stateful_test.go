package stateful

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/state"
)

// checkCounts checks the committed output of a count by record key: for
// every key the counts run 1, 2, 3, ... with no repeat and no gap, up to
// the key's number of inputs.
func checkCounts(t *testing.T, in itest.Input, out []*kgo.Record) {
	t.Helper()
	want := map[string]int{}
	for i := range in.N {
		want[string(in.Record(i).Key)]++
	}
	got := countsOf(t, out)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("key %s: counted %d of %d inputs", k, got[k], n)
		}
	}
}

// The aggregate transform counts exactly through a SIGKILL mid-run, a
// SIGTERM and injected aborts, under both orderings: every key's counts
// run 1, 2, 3, ... in the committed output with no repeat and no gap. The
// restore after the SIGTERM reads nothing, the one after the SIGKILL at
// most the tail; a wiped state directory is rebuilt from the changelog
// and the counts go on.
func TestStatefulCountUnderCrash(t *testing.T) {
	t.Parallel()
	for _, ordering := range []string{"partition", "key"} {
		t.Run(ordering, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				in := itest.Input{Topic: itest.Unique("count-in"), N: 9000, Keys: 60}
				out, group := itest.Unique("count-out"), itest.Unique("count-group")
				tg.NewTopics(t, 4, in.Topic, out)
				run := &countRun{tg: tg, in: in, out: out, group: group, store: "aggregate",
					set: itest.Stateful(t.TempDir(), ordering, "0.2", []string{"aggregate"}, nil)}
				run.killMidFeed(t)

				addr := itest.FreeAddr(t)
				p3 := run.start(t, run.set, func(inst *launch.Instance) { inst.HTTPAddr = addr })
				tg.Produce(t, in, 3*in.N/4, 5*in.N/6)
				tg.WaitCaughtUp(t, group, in.Topic)
				itest.WaitFor(t, 10*time.Second, "a commit of p3", func() bool { return !p3.CommittedAt().IsZero() })
				checkStateStatus(t, addr, 4)
				p3.Terminate(t)
				if n, _ := itest.Restored(p3); n != 0 {
					t.Errorf("the restore after SIGTERM read %d changelog records, want none", n)
				}

				run.wiped(t, itest.Stateful(t.TempDir(), ordering, "0.2", []string{"aggregate"}, nil), 5*in.N/6)
			})
		})
	}
}

// The dedupe transform passes each id exactly once across a SIGKILL, a
// second instance joining and leaving by SIGTERM (two rebalances) and
// injected aborts: the input holds every id three times.
func TestStatefulDedupeUnderCrash(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		ids := 2000
		in := itest.Input{Topic: itest.Unique("dedupe-in"), N: 3 * ids, Keys: ids} // record i has key k(i mod ids)
		out, group := itest.Unique("dedupe-out"), itest.Unique("dedupe-group")
		tg.NewTopics(t, 4, in.Topic, out)
		set := itest.Stateful(t.TempDir(), "key", "0.2", []string{"dedupe"}, nil)
		static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
		tg.Produce(t, in, 0, in.N/3)
		p1 := tg.StartBinary(t, group, group+"-1", in.Topic, out, set, static)
		itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
		time.Sleep(500 * time.Millisecond)
		p1.Kill(t)
		// A second instance joins (a rebalance hands it partitions, whose
		// state it restores from the changelogs) while the next third
		// arrives; it leaves by SIGTERM (its partitions go back) before
		// the last third.
		p2 := tg.StartBinary(t, group, group+"-1", in.Topic, out, set, static)
		p3 := tg.StartBinary(t, group, group+"-2", in.Topic, out,
			itest.Stateful(t.TempDir(), "key", "0.2", []string{"dedupe"}, nil), func(inst *launch.Instance) { inst.InstanceID = group + "-2" })
		tg.Produce(t, in, in.N/3, 2*in.N/3)
		tg.WaitCaughtUp(t, group, in.Topic)
		p3.Terminate(t)
		tg.Produce(t, in, 2*in.N/3, in.N)
		tg.WaitCaughtUp(t, group, in.Topic)
		p2.Terminate(t)
		seen := map[string]string{}
		for _, r := range tg.ReadAll(t, out, true) {
			if prev, ok := seen[string(r.Key)]; ok {
				t.Fatalf("id %s passed twice: %s and %s", r.Key, prev, r.Value)
			}
			seen[string(r.Key)] = string(r.Value)
		}
		if len(seen) != ids {
			t.Fatalf("%d ids passed, want %d", len(seen), ids)
		}
		for k, v := range seen {
			if !strings.HasSuffix(v, ":0") {
				t.Errorf("id %s passed as %s, not its first sighting", k, v)
			}
		}
	})
}

// A changelog with another partition count than the input is refused
// with exit 2, one line naming the topic.
func TestStatefulChangelogMismatch(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, group := itest.Unique("mismatch-in"), itest.Unique("mismatch-out"), itest.Unique("mismatch-group")
		tg.NewTopics(t, 4, in, out)
		changelog := state.ChangelogTopic(group, "aggregate")
		tg.CreateTopicWithConfigs(t, 2, map[string]string{"cleanup.policy": "compact"}, changelog)
		p := tg.StartBinary(t, group, group+"-1", in, out, itest.Stateful(t.TempDir(), "partition", "0", []string{"aggregate"}, nil))
		select {
		case <-p.Done:
		case <-time.After(60 * time.Second):
			t.Fatal("still running with a mismatched changelog")
		}
		var ee *exec.ExitError
		if !errors.As(p.Err, &ee) || ee.ExitCode() != 2 || !strings.Contains(p.Logs.String(), changelog) {
			t.Errorf("exit %v, log %q; want exit 2 naming %s", p.Err, p.Logs.String(), changelog)
		}
		// One line that says what is true (the keys moved, deleting the
		// changelog does not rebuild it) and names both ways out.
		var line string
		for _, l := range strings.Split(p.Logs.String(), "\n") {
			if strings.Contains(l, "configuration error") {
				if line != "" {
					t.Errorf("two configuration error lines: %q and %q", line, l)
				}
				line = l
			}
		}
		for _, want := range []string{changelog + " has 2 partitions, the input 4", "keys moved to other partitions",
			"deleting the changelog would not rebuild it", "a new PROCESSOR_GROUP", "reads the input from its start",
			"to start empty, delete the changelog topics " + changelog} {
			if !strings.Contains(line, want) {
				t.Errorf("the refusal %q does not say %q", line, want)
			}
		}
		if strings.Contains(line, "rebuilt from the input") {
			t.Errorf("the refusal %q still promises a rebuild from the input", line)
		}
	})
}

// checkStateStatus checks that /status at addr shows every one of
// partitions of the aggregate store ready, restored, with keys, and that
// /metrics has the state metrics.
func checkStateStatus(t *testing.T, addr string, partitions int) {
	t.Helper()
	_, body := itest.HTTPGet(addr, "/status")
	var doc struct {
		Restoring bool `json:"state_restoring"`
		State     []struct {
			Store      string `json:"store"`
			Ready      bool   `json:"ready"`
			Keys       int64  `json:"keys"`
			Checkpoint int64  `json:"checkpoint"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/status: %v: %s", err, body)
	}
	ready := 0
	for _, s := range doc.State {
		if s.Store == "aggregate" && s.Ready && s.Keys > 0 && s.Checkpoint > 0 {
			ready++
		}
	}
	if doc.Restoring || ready != partitions {
		t.Errorf("/status shows %d of %d store partitions ready with keys (restoring %v): %s", ready, partitions, doc.Restoring, body)
	}
	_, metrics := itest.HTTPGet(addr, "/metrics")
	for _, m := range []string{"processor_state_restore_records_total", "processor_state_restore_seconds", `processor_state_keys{store="aggregate"}`, `processor_state_bytes{store="aggregate"}`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}
