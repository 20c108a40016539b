package txn

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
)

// The stream time a transaction sets is committed with its offset and
// read back at the next assignment; an aborted transaction's is not; the
// crash attempts' markers, which commit the same offset again, carry the
// committed stream time on, and so do the commits of a suspect
// partition. Metadata that another tool wrote reads as none.
func TestStreamTimeCommitted(t *testing.T) {
	t.Parallel()
	kafkatest.ForEach(t, nil, func(t *testing.T, c *kafkatest.Cluster) {
		topic, group := kafkatest.Unique("time-in"), kafkatest.Unique("time-group")
		c.CreateTopics(t, 1, nil, topic)
		produceDigits(t, c, topic)
		want := func(step string, at int64, p Progress) {
			t.Helper()
			waitCommitted(t, c, group, topic, step, at, p)
		}
		streamTime := func(step string, f *fixture, want int64, known bool) {
			t.Helper()
			if ms, ok := f.StreamTime(topic, 0); ok != known || ms != want {
				t.Fatalf("%s: stream time %d (%t), want %d (%t)", step, ms, ok, want, known)
			}
		}

		f := crashSession(t, c, ExactlyOnce, group, topic, 2)
		f.pollRun(t, 3)
		streamTime("nothing committed", f, 0, false)
		f.SetStreamTime(topic, 0, 500)
		f.commitOne(t, nil)
		want("committed", 3, Progress{Time: 500, TimeAt: 3, Timed: true})
		streamTime("after the commit", f, 500, true)
		f.pollRun(t, 2)
		f.begin(t)
		f.SetStreamTime(topic, 0, 900)
		f.end(t, 2, ReasonInjected)
		streamTime("after an abort", f, 500, true)
		f.die(t)

		for i := 1; i <= 2; i++ { // two processes die on the batch from offset 3
			f = crashSession(t, c, ExactlyOnce, group, topic, 2)
			f.pollRun(t, 7)
			streamTime("assigned again", f, 500, true)
			want("marker", 3, Progress{Crashes: i, At: 3, Extent: 9, Time: 500, TimeAt: 3, Timed: true})
			f.die(t)
		}
		f = crashSession(t, c, ExactlyOnce, group, topic, 2) // a suspect: one at a time
		one := f.pollRun(t, 1)
		streamTime("a suspect", f, 500, true)
		want("alone", 3, Progress{Crashes: 2, At: 3, Extent: 9, Solo: 3, Alone: true, Time: 500, TimeAt: 3, Timed: true})
		f.SetStreamTime(topic, 0, 600)
		f.commitOne(t, one)
		want("alone committed", 4, Progress{Crashes: 2, At: 4, Extent: 9, Time: 600, TimeAt: 4, Timed: true})
		f.pollRun(t, 1)
		want("next alone", 4, Progress{Crashes: 2, At: 4, Extent: 9, Solo: 4, Alone: true, Time: 600, TimeAt: 4, Timed: true})
		f.die(t)

		// Another tool's metadata at the committed offset: none known.
		adm := c.Admin(t)
		foreign := kadm.Offsets{}
		foreign.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4, LeaderEpoch: -1, Metadata: "mirror-maker"})
		if _, err := adm.CommitOffsets(t.Context(), group, foreign); err != nil {
			t.Fatal(err)
		}
		f = crashSession(t, c, ExactlyOnce, group, topic, 2)
		f.pollRun(t, 1)
		streamTime("foreign metadata", f, 0, false)
		f.Close()
	})
}
