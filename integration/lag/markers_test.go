package lag

import (
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"
)

// Two processors in a row: the first copies the input into a middle topic
// in transactions, the second copies the middle topic on. Each of the
// first's transactions ends with a commit marker, which occupies an offset
// but is never a record to process. The second group consumes the markers
// too, as Kafka's own consumer steps over them, so once caught up it has
// committed exactly the log-end offset on every partition: lag tools read
// 0, not 1 per partition. The final output is still exactly the input,
// once, and only data records count as consumed.
func TestTransactionalInputMarkers(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("chain-in"), N: 10_000, Keys: 100}
		mid, out := itest.Unique("chain-mid"), itest.Unique("chain-out")
		g1, g2 := itest.Unique("chain-g1"), itest.Unique("chain-g2")
		tg.NewTopics(t, 3, in.Topic, mid, out)
		tg.Produce(t, in, 0, in.N)

		a := tg.Start(t, itest.InstanceOpts{Group: g1, TxnID: g1 + "-a", Topics: []string{in.Topic}, Out: mid, MaxRecords: 700})
		b := tg.Start(t, itest.InstanceOpts{Group: g2, TxnID: g2 + "-b", Topics: []string{mid}, Out: out, MaxRecords: 700})
		tg.WaitCaughtUp(t, g1, in.Topic, a, b)
		a.Stop(t) // its last commit writes the last markers

		// IsCaughtUp wants the log-end offset itself: past the last markers.
		tg.WaitCaughtUpWithin(t, 60*time.Second, g2, mid, b)
		b.Stop(t)
		if st := b.Pipeline.Stats(); st.Consumed != uint64(in.N) || st.Lag != 0 {
			t.Errorf("the second processor: %+v, want %d consumed (markers are not records) and no lag", st, in.N)
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}
