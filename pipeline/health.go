package pipeline

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/internal/tick"
	"github.com/streamproc/processor/txn"
)

// counters are the pipeline's counts since start, for Stats, Status and
// the progress line.
type counters struct {
	consumed    atomic.Uint64
	produced    atomic.Uint64
	commits     atomic.Uint64
	aborts      atomic.Uint64
	filtered    atomic.Uint64 // input records with no output, committed
	dlq         atomic.Uint64 // input records dead-lettered, committed
	skipped     atomic.Uint64 // input records dropped by the skip policy, committed
	openRecords atomic.Int64  // input records of the open transaction, as of the last poll
}

// health is what Healthy and Ready judge by.
type health struct {
	lastLoop    atomic.Int64 // unix nanos of the loop's last iteration
	running     atomic.Bool
	initialised atomic.Bool
	failure     atomic.Pointer[error]
	failedAt    atomic.Int64 // unix nanoseconds
	// failing is the run of transactions aborted since the last commit,
	// nil when the last one committed (see noteAbort).
	failing atomic.Pointer[abortRun]
	// outage is the run of transactions aborted since the last commit
	// because a service the chain depends on failed (outage.go), nil
	// when the last one committed.
	outage atomic.Pointer[outage]
	// abortWait and outageWait draw the waits of abortBackoff and
	// unavailable; New sets them.
	abortWait, outageWait *backoff.Backoff
}

// tick notes an iteration of the loop.
func (h *health) tick() { h.lastLoop.Store(time.Now().UnixNano()) }

// fail stores err as the fatal error, from now.
func (h *health) fail(err error) {
	h.failedAt.Store(time.Now().UnixNano())
	h.failure.Store(&err)
}

// report stores *err, a report of the monitor's, as the fatal error
// unless one is stored already.
func (h *health) report(err *error, at time.Time) {
	if h.failure.CompareAndSwap(nil, err) {
		h.failedAt.Store(at.UnixNano())
	}
}

// withdraw takes back a report, if it is still the one stored.
func (h *health) withdraw(err *error) { h.failure.CompareAndSwap(err, nil) }

// fatal returns when the fatal error was stored, and the error; nil when
// there is none.
func (h *health) fatal() (time.Time, error) {
	f := h.failure.Load()
	if f == nil {
		return time.Time{}, nil
	}
	return time.Unix(0, h.failedAt.Load()), *f
}

// abortRun is a run of aborted transactions with no commit between them.
type abortRun struct {
	since time.Time
	n     int
}

// minFailingAborts and Options.FailingAfter bound a run of aborts that
// Healthy tolerates: transactions that keep aborting with no commit, at
// least minFailingAborts of them for longer than FailingAfter, are
// unhealthy. A broker that answers every write with an error that
// retrying does not clear (replicas lost, a partition offline) is no
// record's fault, and no abort can fix it: the instance must say so
// rather than abort forever.
const minFailingAborts = 3

// defaultFailingAfter is FailingAfter's default: twice the stall
// timeout, at least a minute, so that a broker restart or a rebalance is
// over long before.
func defaultFailingAfter(stall time.Duration) time.Duration { return max(2*stall, time.Minute) }

// abortPolicy bounds abortBackoff's waits: below 50ms after the third
// abort in a row, the bound doubling to 2s, each wait drawn at random
// below it (full jitter: instances failing together do not retry
// together, and the aborts go on until one commits).
func abortPolicy() backoff.Policy {
	return backoff.Policy{Base: 50 * time.Millisecond, Cap: 2 * time.Second}
}

// abortBackoff waits before the next transaction once several have
// aborted in a row (abortPolicy), so that a cause that no abort clears
// (a broker refusing every write) is not retried in a tight loop. It
// returns early when ctx ends.
func (h *health) abortBackoff(ctx context.Context) {
	r := h.failing.Load()
	if r == nil || r.n < minFailingAborts {
		return
	}
	_ = backoff.Sleep(ctx, h.abortWait.At(r.n-minFailingAborts)) // ctx ended: the loop sees it
}

// noteAbort counts an aborted transaction into the run of aborts since
// the last commit. The caller leaves out aborts that found a record at
// fault; the watchdog's aborts make progress too (they shrink the
// transaction until it fits), and injected ones are a drill's, so they
// neither start nor extend a run.
func (h *health) noteAbort(reason txn.Reason) {
	if reason == txn.ReasonWatchdog || reason == txn.ReasonInjected || reason == txn.ReasonUnavailable {
		return
	}
	r := h.failing.Load()
	next := &abortRun{since: time.Now(), n: 1}
	if r != nil {
		next.since, next.n = r.since, r.n+1
	}
	h.failing.Store(next)
}

// progress logs one line every ProgressInterval.
func (p *Pipeline) progress(ctx context.Context) {
	last := time.Now()
	var lastIn, lastOut, lastCommits, lastAborts uint64
	tick.Every(ctx, p.o.ProgressInterval, func(now time.Time) {
		secs := now.Sub(last).Seconds()
		in, out, c, a := p.stats.consumed.Load(), p.stats.produced.Load(), p.stats.commits.Load(), p.stats.aborts.Load()
		p.log.Info("progress",
			"in_per_sec", int64(float64(in-lastIn)/secs),
			"out_per_sec", int64(float64(out-lastOut)/secs),
			"committed", c-lastCommits,
			"aborted", a-lastAborts,
			"lag", p.lag(),
			"ready", p.Ready(),
		)
		last, lastIn, lastOut, lastCommits, lastAborts = now, in, out, c, a
	})
}

// Stats is a snapshot of the pipeline's counters since start.
type Stats struct {
	Consumed, Produced, Commits, Aborts uint64
	Lag                                 int64 // of the assigned partitions: last stable offset minus committed offset, summed
}

// Stats returns the counters since start; safe from any goroutine.
func (p *Pipeline) Stats() Stats {
	s := p.stats.snapshot()
	s.Lag = p.lag()
	return s
}

// snapshot returns the counts, without the lag.
func (c *counters) snapshot() Stats {
	return Stats{Consumed: c.consumed.Load(), Produced: c.produced.Load(), Commits: c.commits.Load(), Aborts: c.aborts.Load()}
}

// lag is the assigned partitions' lag, summed.
func (p *Pipeline) lag() int64 {
	_, total := p.parts.snapshot()
	return total
}

// Healthy returns nil while the loop is alive and not stuck: it is waiting
// for Kafka, or its last iteration started within TransactionTimeout, and (into
// PostgreSQL) commits are not failing for a reason retrying does not fix,
// nor for a transient one for longer than TransactionTimeout. After a fatal
// error it returns that error.
func (p *Pipeline) Healthy() error {
	if _, err := p.health.fatal(); err != nil {
		return err
	}
	obs := p.observer()
	if !p.health.initialised.Load() || obs == nil || obs.Connecting() {
		return nil
	}
	if since := time.Since(time.Unix(0, p.health.lastLoop.Load())); since > p.o.TransactionTimeout {
		return fmt.Errorf("the processing loop has not advanced for %s", since.Round(time.Second))
	}
	if err := p.health.outageError(outageUnhealthy(p.o.TransactionTimeout)); err != nil {
		return err
	}
	if r := p.health.failing.Load(); r != nil && r.n >= minFailingAborts && time.Since(r.since) > p.o.FailingAfter {
		why := ""
		if _, last := obs.Metrics().Aborts(); last != nil {
			why = ", the last one " + string(last.Reason)
			if last.Detail != "" {
				why += ": " + clip(last.Detail)
			}
		}
		return fmt.Errorf("no transaction has committed for %s: %d aborted in a row%s", time.Since(r.since).Round(time.Second), r.n, why)
	}
	// Into PostgreSQL: a failure retrying is not expected to fix is
	// unhealthy at once, a transient one once it has lasted TransactionTimeout.
	if since, transient, why := obs.CommitFailing(); !since.IsZero() && (!transient || time.Since(since) > p.o.TransactionTimeout) {
		return fmt.Errorf("committing to PostgreSQL has failed for %s: %s", time.Since(since).Round(time.Second), clip(why))
	}
	return nil
}

// Ready reports whether the pipeline runs, has joined its group, has
// initialised its transactional producer, and no service the chain
// depends on is failing.
func (p *Pipeline) Ready() bool {
	obs := p.observer()
	return p.health.running.Load() && obs != nil && obs.Ready() && p.health.outage.Load() == nil && !p.st.restoring.Load()
}
