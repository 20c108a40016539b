package integration

import (
	"testing"
	"time"
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
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("chain-in"), n: 10_000, keys: 100}
		mid, out := unique("chain-mid"), unique("chain-out")
		g1, g2 := unique("chain-g1"), unique("chain-g2")
		tg.createTopics(t, 3, in.topic, mid, out)
		tg.produce(t, in, 0, in.n)

		a := tg.start(t, instanceOpts{group: g1, txnID: g1 + "-a", topics: []string{in.topic}, out: mid, maxRecords: 700})
		b := tg.start(t, instanceOpts{group: g2, txnID: g2 + "-b", topics: []string{mid}, out: out, maxRecords: 700})
		tg.waitCaughtUp(t, g1, in.topic, a, b)
		a.stop(t) // its last commit writes the last markers

		// caughtUp wants the log-end offset itself: past the last markers.
		tg.waitCaughtUpWithin(t, 60*time.Second, g2, mid, b)
		b.stop(t)
		if st := b.p.Stats(); st.Consumed != uint64(in.n) || st.Lag != 0 {
			t.Errorf("the second processor: %+v, want %d consumed (markers are not records) and no lag", st, in.n)
		}
		checkExactlyOnce(t, in, tg.readAll(t, out, true))
	})
}
