package pipeline

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// A record that kills the process (a guest that exhausts the host, a panic
// past recovery, an out-of-memory kill) is found by the session, which
// counts the processes that died on a partition's records in the
// committed offsets' metadata (txn.Options.MaxCrashAttempts). At the
// limit the loop runs one record per transaction (solo); the record the
// next process dies on is handed back as a culprit, which the loop fails
// under the error policy without running it.

// stageCrash is the failed stage of a record the process died on: no
// chain entry can be named, as none returned.
const stageCrash = "crash"

// crashWatch is what a session that counts crash attempts offers the
// loop; *txn.Session does. A session without it runs whole transactions
// always.
type crashWatch interface {
	// Solo reports whether records are to run one per transaction.
	Solo() bool
	// Attempt records that the records of a poll are about to run;
	// TakeCulprits then returns those among them found to kill the
	// process.
	Attempt(ctx context.Context, fs kgo.Fetches)
	TakeCulprits() []txn.Culprit
}

// CrashError is why a record the process died on failed: its dead
// letter's processor.error.
type CrashError struct {
	// Crashes is how many processes died with the record in flight, the
	// last with it alone in its transaction.
	Crashes int
	setting string // MaxCrashAttempts' name (Options.SettingName)
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("the process died %d times with this record in flight, the last time with it alone in its transaction; "+
		"it is not run again (%s)", e.Crashes, e.setting)
}

// solo reports whether the session asks for one record per transaction.
func (p *Pipeline) solo() bool {
	cw, ok := p.s.(crashWatch)
	return ok && cw.Solo()
}

// attempt tells the session that the records of fs are about to run (the
// last thing before they do, after their state is restored), and makes
// the culprits among them poison: their attempt in this transaction fails
// them under the policy without running them.
func (p *Pipeline) attempt(ctx context.Context, fs kgo.Fetches) {
	cw, ok := p.s.(crashWatch)
	if !ok {
		return
	}
	cw.Attempt(ctx, fs)
	for _, c := range cw.TakeCulprits() {
		src := record.Source{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset}
		p.book.poison[src] = poison{failure: failure{stage: stageCrash, attempts: c.Crashes,
			err: &CrashError{Crashes: c.Crashes, setting: p.names.maxCrashAttempts}}}
		p.log.Error("a record killed the process every time it ran; it goes where "+p.names.onError+" says without running again",
			"topic", c.Topic, "partition", c.Partition, "offset", c.Offset, "crashes", c.Crashes, "policy", string(p.o.OnError))
	}
}

// oversized handles a poll of more than one record while solo (an
// assignment that made a partition a suspect came while the poll
// waited): nothing of it runs; the session rewinds to the committed
// offsets by an abort, and the next polls take one record at a time. It
// reports whether it did.
func (p *Pipeline) oversized(ctx context.Context, polled int) (bool, error) {
	if polled <= 1 || !p.solo() {
		return false, nil
	}
	p.log.Info("a partition's records are suspected of killing the process; polling them again one at a time")
	return true, p.rewind(ctx)
}

// countCrashed counts, as the transaction that applied them commits, the
// culprits it failed under the policy.
func (p *Pipeline) countCrashed() {
	for _, src := range p.open.applied {
		if pz, ok := p.book.poison[src]; ok && pz.stage == stageCrash {
			p.o.Metrics.Crashed.Inc()
		}
	}
}
