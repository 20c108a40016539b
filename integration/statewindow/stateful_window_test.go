package statewindow

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/state"
)

// windowedInput is the input of the windowed count: for each of windows
// one-minute windows, perKey records of each of keys keys, their
// timestamps spread over the window's first 45 seconds in the order of
// the slice, so that every partition's record time only advances.
func windowedInput(topic string, base time.Time, windows, keys, perKey int) []*kgo.Record {
	var recs []*kgo.Record
	for w := range windows {
		for j := range perKey {
			for k := range keys {
				ts := base.Add(time.Duration(w)*time.Minute + time.Duration(j)*15*time.Second + time.Duration(k)*10*time.Millisecond)
				recs = append(recs, itest.Stamped(topic, "k"+strconv.Itoa(k), fmt.Sprintf(`{"w":%d,"j":%d}`, w, j), ts))
			}
		}
	}
	return recs
}

// windowedOutput is one output of a windowed count.
type windowedOutput struct {
	Key         string    `json:"key"`
	Value       int       `json:"value"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
}

// checkWindowedCounts checks the committed output of a count by record
// key in one-minute windows over in: every output's window is the minute
// of its timestamp (the input's, which it keeps), and for every key and
// window the counts run 1, 2, 3, ... with no repeat and no gap, up to the
// inputs of the key in the window, each keyed <key>@<window start>.
func checkWindowedCounts(t *testing.T, in, out []*kgo.Record) {
	t.Helper()
	type kw struct {
		key   string
		start int64
	}
	want := map[kw]int{}
	for _, r := range in {
		want[kw{string(r.Key), r.Timestamp.Truncate(time.Minute).UnixMilli()}]++
	}
	got := map[kw]int{}
	for _, r := range out {
		var v windowedOutput
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %s: %v", r.Value, err)
		}
		start := r.Timestamp.Truncate(time.Minute)
		if !v.WindowStart.Equal(start) || !v.WindowEnd.Equal(start.Add(time.Minute)) {
			t.Fatalf("output %s at %s: window [%s, %s), want [%s, %s)", r.Value, r.Timestamp.UTC().Format(time.RFC3339Nano),
				v.WindowStart.Format(time.RFC3339), v.WindowEnd.Format(time.RFC3339), start.UTC().Format(time.RFC3339), start.Add(time.Minute).UTC().Format(time.RFC3339))
		}
		w := kw{v.Key, start.UnixMilli()}
		if v.Key+"@"+strconv.FormatInt(start.UnixMilli(), 10) != string(r.Key) || v.Value != got[w]+1 {
			t.Fatalf("key %s, window %s: count %d after %d", r.Key, v.WindowStart.Format(time.RFC3339), v.Value, got[w])
		}
		got[w] = v.Value
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("key %s, window %s: counted %d of %d inputs", w.key, time.UnixMilli(w.start).UTC().Format(time.RFC3339), got[w], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d key windows in the output, want %d", len(got), len(want))
	}
}

// A count by record key in one-minute windows (PROCESSOR_AGGREGATE_WINDOW)
// over records stamped across twenty windows: each output carries the
// window of its record's timestamp, the counts start again at 1 in every
// window and run 1, 2, 3 per key and window, with no repeat and no gap,
// through a SIGKILL mid-run, and with injected aborts as well: the replay
// of an aborted transaction whose Expire had passed a window's end must
// find the window's entries again (it found them gone, and started the
// count again at 1, before Abort put the record time back).
func TestStatefulWindowCountUnderCrash(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, abortRate string }{{"kill", "0"}, {"kill-and-aborts", "0.2"}} {
		t.Run(c.name, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				windowCountUnderCrash(t, tg, c.abortRate)
			})
		})
	}
}

// windowCountUnderCrash is TestStatefulWindowCountUnderCrash on tg, with
// transactions aborted on purpose at abortRate.
func windowCountUnderCrash(t *testing.T, tg *itest.Target, abortRate string) {
	topic, out, group := itest.Unique("window-in"), itest.Unique("window-out"), itest.Unique("window-group")
	in := windowedInput(topic, itest.StampedBase(), 20, 100, 3)
	tg.NewTopics(t, 4, topic, out)
	set := itest.Stateful(t.TempDir(), "partition", abortRate, []string{"aggregate"}, map[string]string{"PROCESSOR_AGGREGATE_WINDOW": "1m"})
	static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }
	third := len(in) / 3
	tg.ProduceSync(t, in[:third])
	p1 := tg.StartBinary(t, group, group+"-1", topic, out, set, static)
	itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := third; i < 2*third; i += third / 20 { // for about 2s: the SIGKILL comes while records flow
			if t.Context().Err() != nil || !tg.ProduceStamped(t, in[i:min(i+third/20, 2*third)]) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	p1.Kill(t)
	p2 := tg.StartBinary(t, group, group+"-1", topic, out, set, static)
	itest.WaitClosed(t, fed, itest.FeedTimeout, "the input feeder")
	tg.ProduceSync(t, in[2*third:])
	tg.WaitCaughtUp(t, group, topic)
	itest.WaitFor(t, 10*time.Second, "a commit of p2", func() bool { return !p2.CommittedAt().IsZero() })
	p2.Terminate(t)
	n, _ := itest.Restored(p2)
	t.Logf("%s: the restore after SIGKILL read %d changelog records", tg.Name, n)
	checkWindowedCounts(t, in, tg.ReadAll(t, out, true))
}

// stateKeys is the number of keys of store over the partitions that /status
// at addr shows, as committed; ok false when it cannot be read.
func stateKeys(addr, store string) (keys int64, ok bool) {
	code, body := itest.HTTPGet(addr, "/status")
	if code != 200 {
		return 0, false
	}
	var doc struct {
		State []struct {
			Store string `json:"store"`
			Keys  int64  `json:"keys"`
		} `json:"state"`
	}
	if json.Unmarshal([]byte(body), &doc) != nil {
		return 0, false
	}
	for _, s := range doc.State {
		if s.Store == store {
			keys += s.Keys
		}
	}
	return keys, true
}

// metricKeys is processor_state_keys{store} of /metrics at addr, or -1.
func metricKeys(addr, store string) int64 {
	_, body := itest.HTTPGet(addr, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, `processor_state_keys{store="`+store+`"} `); ok {
			if n, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return int64(n)
			}
		}
	}
	return -1
}

// tombstoned counts the keys of a changelog whose last committed record
// is a tombstone (a deleted entry), and the keys it holds in all.
func tombstoned(recs []*kgo.Record) (deleted, keys int) {
	last := map[string]bool{} // key: its last record is a tombstone
	for _, r := range recs {
		last[string(r.Key)] = r.Value == nil
	}
	for _, del := range last {
		if del {
			deleted++
		}
	}
	return deleted, len(last)
}

// Expiry bounds a store: a steady stream of new keys whose timestamps
// advance a minute at a time, fed one minute after another, through a
// count in one-minute windows and through a dedupe with a one-minute
// PROCESSOR_DEDUPE_WINDOW (and no grace), leaves a store of at most a few minutes' keys
// (in /status and in processor_state_keys of /metrics), far below the
// distinct keys that went through, and the changelog ends every expired
// key with a tombstone.
func TestStatefulWindowExpiryBoundsTheStore(t *testing.T) {
	t.Parallel()
	const minutes, perMinute = 30, 200 // 6,000 distinct keys, two records each
	for _, c := range []struct {
		name, store string
		settings    map[string]string
	}{
		{"aggregate", "aggregate", map[string]string{"PROCESSOR_AGGREGATE_WINDOW": "1m"}},
		{"dedupe", "dedupe", map[string]string{"PROCESSOR_DEDUPE_WINDOW": "1m", "PROCESSOR_DEDUPE_GRACE": "0s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
				topic, out, group := itest.Unique("expiry-in"), itest.Unique("expiry-out"), itest.Unique("expiry-group")
				tg.NewTopics(t, 4, topic, out)
				addr := itest.FreeAddr(t)
				p := tg.StartBinary(t, group, group+"-1", topic, out,
					itest.Stateful(t.TempDir(), "partition", "0", []string{c.name}, c.settings),
					func(inst *launch.Instance) { inst.HTTPAddr = addr })
				base := itest.StampedBase()
				var peak atomic.Int64
				stop := make(chan struct{})
				var sampled sync.WaitGroup
				sampled.Add(1)
				go func() {
					defer sampled.Done()
					for {
						if n, ok := stateKeys(addr, c.store); ok && n > peak.Load() {
							peak.Store(n)
						}
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
						}
					}
				}()
				for m := range minutes {
					var recs []*kgo.Record
					for j := range 2 { // the second record of a key is a duplicate for dedupe, a 2 for aggregate
						for i := range perMinute {
							ts := base.Add(time.Duration(m)*time.Minute + time.Duration(j)*20*time.Second + time.Duration(i)*50*time.Millisecond)
							recs = append(recs, itest.Stamped(topic, "n"+strconv.Itoa(m*perMinute+i), "{}", ts))
						}
					}
					tg.ProduceSync(t, recs)
					tg.WaitCaughtUp(t, group, topic)
					if m == 0 {
						itest.WaitFor(t, 10*time.Second, "a first commit", func() bool { return !p.CommittedAt().IsZero() })
					}
				}
				itest.WaitFor(t, 10*time.Second, "the last commit applied locally", func() bool {
					n, ok := stateKeys(addr, c.store)
					return ok && n <= 2*perMinute
				})
				close(stop)
				sampled.Wait()
				// /status and /metrics are read one after the other: a
				// commit (an expiry's tombstones) may land between them, so
				// they are read again until /status says the same before
				// and after /metrics.
				var final, metric int64
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					before, _ := stateKeys(addr, c.store)
					metric = metricKeys(addr, c.store)
					final, _ = stateKeys(addr, c.store)
					if (before == final && metric == final) || time.Now().After(deadline) {
						break
					}
				}
				p.Terminate(t)

				distinct := minutes * perMinute
				t.Logf("%s, %s: %d distinct keys; the store held at most %d, at the end %d (processor_state_keys %d)", c.name, tg.Name, distinct, peak.Load(), final, metric)
				if bound := int64(3 * perMinute); peak.Load() > bound || peak.Load() == 0 {
					t.Errorf("the store held up to %d keys of the %d that went through; want at most %d (three minutes' keys)", peak.Load(), distinct, bound)
				}
				if metric != final {
					t.Errorf("processor_state_keys{store=%q} is %d, /status says %d, and they did not agree within 10s", c.store, metric, final)
				}
				deleted, keys := tombstoned(tg.ReadAll(t, state.ChangelogTopic(group, c.store), true))
				if keys != distinct || int64(deleted) < int64(distinct)-final {
					t.Errorf("the changelog holds %d keys, %d of them ending in a tombstone; want %d keys, at least %d tombstoned", keys, deleted, distinct, int64(distinct)-final)
				}
				if want := map[string]int{"aggregate": 2 * distinct, "dedupe": distinct}[c.name]; len(tg.ReadAll(t, out, true)) != want {
					t.Errorf("%d outputs, want %d", len(tg.ReadAll(t, out, true)), want)
				}
			})
		})
	}
}

// A dedupe with a one-minute window (PROCESSOR_DEDUPE_WINDOW), across a
// SIGKILL and a restart: an id seen again within a minute of the sighting
// that passed is filtered, one seen again after it passes, and starts a
// new minute, in which it is filtered again. Every id passes exactly at
// seconds 0, 61 and 130 of its record time, never at 30, 50, 81 or 100.
// With injected aborts: the replay of an aborted transaction whose Expire
// had passed an id's window must not let the id's duplicates through.
func TestStatefulWindowDedupeAcrossRestart(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		const ids = 300
		topic, out, group := itest.Unique("dwindow-in"), itest.Unique("dwindow-out"), itest.Unique("dwindow-group")
		tg.NewTopics(t, 4, topic, out)
		base := itest.StampedBase()
		phase := func(second int) []*kgo.Record {
			var recs []*kgo.Record
			for i := range ids {
				ts := base.Add(time.Duration(second)*time.Second + time.Duration(i)*10*time.Millisecond)
				recs = append(recs, itest.Stamped(topic, "id"+strconv.Itoa(i), "at:"+strconv.Itoa(second), ts))
			}
			return recs
		}
		set := itest.Stateful(t.TempDir(), "key", "0.2", []string{"dedupe"}, map[string]string{"PROCESSOR_DEDUPE_WINDOW": "1m"})
		static := func(inst *launch.Instance) { inst.InstanceID = group + "-1" }

		tg.ProduceSync(t, phase(0))
		tg.ProduceSync(t, phase(30))
		p1 := tg.StartBinary(t, group, group+"-1", topic, out, set, static)
		tg.WaitCaughtUp(t, group, topic)
		p1.Kill(t)

		tg.ProduceSync(t, phase(50)) // within the minute of second 0, after the SIGKILL: filtered
		tg.ProduceSync(t, phase(61)) // the minute is over: passes
		p2 := tg.StartBinary(t, group, group+"-1", topic, out, set, static)
		tg.WaitCaughtUp(t, group, topic)
		p2.Terminate(t)

		tg.ProduceSync(t, phase(81))  // within the minute of second 61, after the restart: filtered
		tg.ProduceSync(t, phase(100)) // still within it
		tg.ProduceSync(t, phase(130)) // over: passes
		p3 := tg.StartBinary(t, group, group+"-1", topic, out, set, static)
		tg.WaitCaughtUp(t, group, topic)
		p3.Terminate(t)

		passed := map[string][]string{}
		for _, r := range tg.ReadAll(t, out, true) {
			passed[string(r.Key)] = append(passed[string(r.Key)], string(r.Value))
		}
		want := "at:0 at:61 at:130"
		for i := range ids {
			id := "id" + strconv.Itoa(i)
			if got := strings.Join(passed[id], " "); got != want {
				t.Errorf("id %s passed as %q, want %q", id, got, want)
			}
		}
		if len(passed) != ids {
			t.Errorf("%d ids passed, want %d", len(passed), ids)
		}
	})
}
