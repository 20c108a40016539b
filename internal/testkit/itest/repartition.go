package itest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// WaitHopCaughtUp waits until group has committed every record of the
// repartition topic: the partitions no group key went to have none.
func (tg *Target) WaitHopCaughtUp(t *testing.T, group, topic string) {
	t.Helper()
	WaitFor(t, 90*time.Second, "the group caught up on "+topic, func() bool {
		adm := tg.Admin(t)
		ends, err := adm.ListEndOffsets(t.Context(), topic)
		if err != nil {
			return false
		}
		committed, err := adm.FetchOffsetsForTopics(t.Context(), group, topic)
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			if c, ok := committed.Lookup(topic, e.Partition); e.Offset > 0 && (!ok || c.At != e.Offset) {
				done = false
			}
		})
		return done
	})
}
