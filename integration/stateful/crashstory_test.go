package stateful

import (
	"testing"
	"time"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/itest"
	"github.com/streamproc/processor/state"
)

// countRun is one run of a count chain through the crashes of
// TestStatefulCountUnderCrash and TestWasmStateCountUnderCrash: one
// static member (group-1) at a time, on the input in with its own
// partitions, the chain's settings set, its store's changelog that of
// store.
type countRun struct {
	tg                *itest.Target
	in                itest.Input
	out, group, store string
	set               func(*launch.Instance)
}

// static makes an instance the run's one static member.
func (r *countRun) static(inst *launch.Instance) { inst.InstanceID = r.group + "-1" }

// start starts an instance of the run with more settings.
func (r *countRun) start(t *testing.T, set func(*launch.Instance), more ...func(*launch.Instance)) *itest.Proc {
	t.Helper()
	return r.tg.StartBinary(t, r.group, r.group+"-1", r.in.Topic, r.out, append([]func(*launch.Instance){set, r.static}, more...)...)
}

// killMidFeed runs the first third of the input, SIGKILLs the instance
// while the second third arrives, restarts it on the same state
// directory and member ID, and writes the input up to three quarters;
// the restart must have read only the changelog's tail.
func (r *countRun) killMidFeed(t *testing.T) {
	t.Helper()
	tg, in := r.tg, r.in
	tg.Produce(t, in, 0, in.N/3)
	p1 := r.start(t, r.set)
	itest.WaitFor(t, 60*time.Second, "a first commit", func() bool { return !p1.CommittedAt().IsZero() })
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := in.N / 3; i < 2*in.N/3; i += in.N / 30 {
			if t.Context().Err() != nil || !tg.Produce(t, in, i, min(i+in.N/30, 2*in.N/3)) {
				return
			}
			time.Sleep(30 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	p1.Kill(t)
	changelog := len(tg.ReadAll(t, state.ChangelogTopic(r.group, r.store), true))

	p2 := r.start(t, r.set)
	itest.WaitClosed(t, fed, itest.FeedTimeout, "the input feeder")
	tg.Produce(t, in, 2*in.N/3, 3*in.N/4) // after the start: p2 has work
	tg.WaitCaughtUp(t, r.group, in.Topic)
	itest.WaitFor(t, 10*time.Second, "a commit of p2", func() bool { return !p2.CommittedAt().IsZero() })
	p2.Terminate(t)
	if n, _ := itest.Restored(p2); n >= changelog && changelog > 0 {
		t.Errorf("the restore after SIGKILL read %d changelog records of %d: not only the tail", n, changelog)
	} else {
		t.Logf("%s: restore after SIGKILL read %d of the changelog's %d records", tg.Name, n, changelog)
	}
}

// wiped runs the input from from to its end on an instance whose state
// directory is empty (settings wiped), which must rebuild it from the
// changelog, and checks every key's counts in the committed output.
func (r *countRun) wiped(t *testing.T, wiped func(*launch.Instance), from int) {
	t.Helper()
	p := r.start(t, wiped)
	r.tg.Produce(t, r.in, from, r.in.N)
	r.tg.WaitCaughtUp(t, r.group, r.in.Topic)
	itest.WaitFor(t, 10*time.Second, "a commit after the wipe", func() bool { return !p.CommittedAt().IsZero() })
	p.Terminate(t)
	if _, rebuilt := itest.Restored(p); !rebuilt {
		t.Error("a wiped state directory was not rebuilt from the changelog")
	}
	checkCounts(t, r.in, r.tg.ReadAll(t, r.out, true))
}
