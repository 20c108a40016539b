package lag

import (
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"
)

// An instance that died after sending its offsets in a transaction but
// before ending it leaves pending offsets in the group. A new instance with
// another transactional ID cannot abort that transaction; its offset fetch
// is answered UNSTABLE_OFFSET_COMMIT until the transaction times out, and
// only then does it start, from the last committed offsets (the dead
// transaction's offsets were aborted with it). Nothing is skipped, nothing
// doubled, and the dead transaction's output stays invisible.
func TestPendingOffsetsOfDeadTransaction(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("pending-in"), N: 6000, Keys: 60}
		out, group := itest.Unique("pending-out"), itest.Unique("pending-group")
		tg.NewTopics(t, 3, in.Topic, out)
		tg.Produce(t, in, 0, in.N)

		const deadTimeout = 6 * time.Second
		died := tg.DeadTransactionWithOffsets(t, group, in.Topic, out, deadTimeout)

		a := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-new", Topics: []string{in.Topic}, Out: out})
		itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return a.Pipeline.Stats().Commits > 0 })
		waited := time.Since(died)
		tg.WaitCaughtUp(t, group, in.Topic, a)
		a.Stop(t)
		t.Logf("%s: first commit %s after the transaction died (its timeout %s)", tg.Name, waited.Round(10*time.Millisecond), deadTimeout)
		if waited < deadTimeout/2 {
			t.Errorf("the new instance committed %s after the dead transaction began, before it could have timed out (%s)", waited, deadTimeout)
		}
		itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	})
}
