package statewindow

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/launch"
)

// Expiry keeps up with a backlog: an hour of one-minute windows of new
// keys, produced before the processor starts, is drained through a
// windowed count with the transactions as large as a backlog makes them.
// The store, as committed, never holds more than the windows open at the
// stream time imply: with no grace, one minute's keys (two, as a minute
// closes and the next opens), since each poll's expiry runs again at the
// stream time after its last record. Expiry bounded in count per poll
// (1,000 deletions), by the poll's earliest record time, fell behind
// here and kept most of the hour's keys.
func TestStatefulExpiryKeepsUpWithBacklog(t *testing.T) {
	t.Parallel()
	const minutes, perMinute = 60, 2000 // 120,000 distinct keys, two records each
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		topic, out, group := itest.Unique("backlog-in"), itest.Unique("backlog-out"), itest.Unique("backlog-group")
		tg.NewTopics(t, 4, topic, out)
		base := itest.StampedBase().Add(-time.Hour)
		var recs []*kgo.Record
		for m := range minutes {
			for j := range 2 {
				for i := range perMinute {
					ts := base.Add(time.Duration(m)*time.Minute + time.Duration(j)*20*time.Second + time.Duration(i)*5*time.Millisecond)
					recs = append(recs, itest.Stamped(topic, "n"+strconv.Itoa(m*perMinute+i), "{}", ts))
				}
			}
		}
		tg.ProduceSync(t, recs)

		addr := itest.FreeAddr(t)
		p := tg.StartBinary(t, group, group+"-1", topic, out,
			itest.Stateful(t.TempDir(), "partition", "0", []string{"aggregate"}, map[string]string{"PROCESSOR_AGGREGATE_WINDOW": "1m"}),
			func(inst *launch.Instance) { inst.HTTPAddr = addr })
		var peak atomic.Int64
		stop := make(chan struct{})
		var sampled sync.WaitGroup
		sampled.Add(1)
		go func() {
			defer sampled.Done()
			for {
				if n, ok := stateKeys(addr, "aggregate"); ok && n > peak.Load() {
					peak.Store(n)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		tg.WaitCaughtUpWithin(t, 3*time.Minute, group, topic)
		close(stop)
		sampled.Wait()
		final, _ := stateKeys(addr, "aggregate")
		p.Terminate(t)
		distinct := minutes * perMinute
		bound := int64(2 * perMinute)
		t.Logf("%s: %d distinct keys drained as a backlog; the store held at most %d (bound %d), at the end %d", tg.Name, distinct, peak.Load(), bound, final)
		if peak.Load() > bound || peak.Load() == 0 {
			t.Errorf("the store held up to %d keys of the %d that went through; want at most %d", peak.Load(), distinct, bound)
		}
		if n := len(tg.ReadAll(t, out, true)); n != 2*distinct {
			t.Errorf("%d outputs, want %d", n, 2*distinct)
		}
	})
}
