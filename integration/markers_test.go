package integration

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Two processors in a row: the first copies the input into a middle topic
// in transactions, the second copies the middle topic on. Each of the
// first's transactions ends with a commit marker, which occupies an offset
// but is never handed to a consumer: a fully caught-up second group has
// committed, on every partition that has data, one below the log-end
// offset. The final output is still exactly the input, once.
func TestTransactionalInputMarkers(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		in := input{topic: unique("chain-in"), n: 10_000, keys: 100}
		mid, out := unique("chain-mid"), unique("chain-out")
		g1, g2 := unique("chain-g1"), unique("chain-g2")
		tg.createTopics(t, 3, in.topic, mid, out)
		tg.produce(t, in, 0, in.n)

		a := tg.start(t, instanceOpts{group: g1, txnID: g1 + "-a", topics: []string{in.topic}, out: mid, maxRecords: 700})
		b := tg.start(t, instanceOpts{group: g2, txnID: g2 + "-b", topics: []string{mid}, out: out, maxRecords: 700})
		tg.waitCaughtUp(t, g1, in.topic, a, b)
		waitFor(t, 60*time.Second, "the second group to commit everything", func() bool { return b.p.Stats().Consumed == uint64(in.n) })
		a.stop(t)
		b.stop(t)

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		adm := tg.admin(t)
		ends, err := adm.ListEndOffsets(ctx, mid)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsets(ctx, g2)
		if err != nil {
			t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(mid, o.Partition)
			if !ok {
				t.Errorf("partition %d: no committed offset", o.Partition)
				return
			}
			if c.At != o.Offset-1 {
				t.Errorf("partition %d: committed %d, log-end %d: want committed one below the end (the last commit marker)", o.Partition, c.At, o.Offset)
			}
		})
		checkExactlyOnce(t, in, tg.readAll(t, out, true))
	})
}
