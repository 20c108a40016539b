package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// A service the chain depends on (a Schema Registry) that fails is no
// record's fault (transform.Unavailable): the transaction aborts, waits
// and runs again, and no record is retried as a record, failed or
// dead-lettered for it. While it lasts the instance is not ready; once it
// has lasted outageUnhealthy it is unhealthy, with the service's error.
// A refusal no retry clears (transform.Fatal, such as credentials the
// service rejects) stops the processor instead.

// outagePolicy bounds the wait after a transaction aborted for a failing
// service: below 100ms after the first, the bound doubling to 5s, each
// wait drawn at random below it (full jitter: instances that lost the
// service together do not come back to it together).
func outagePolicy() backoff.Policy {
	return backoff.Policy{Base: 100 * time.Millisecond, Cap: 5 * time.Second}
}

// outageUnhealthy is how long an outage lasts before Healthy reports it:
// a quarter of the stall timeout, at most 10s, so that a registry
// restarting is not reported but one that is down is, well before a
// liveness probe gives up.
func outageUnhealthy(stall time.Duration) time.Duration { return min(stall/4, 10*time.Second) }

// outage is a run of transactions aborted because a service failed, with
// no commit between them.
type outage struct {
	since time.Time
	n     int
	stage string // the stage whose service failed
	err   error
}

// dependencyError is what produceOutputs returns for a record whose chain
// run found a service failing: the transaction ends without blaming it.
type dependencyError struct {
	stage string
	err   error
}

func (e *dependencyError) Error() string { return stageError(e.stage, e.err) }

// stageError is err as the failure of transform stage: prefixed with the
// stage unless err, a *transform.Error of that stage, names it already.
func stageError(stage string, err error) string {
	var te *transform.Error
	if errors.As(err, &te) && te.Stage == stage {
		return err.Error()
	}
	return fmt.Sprintf("transform %s: %v", stage, err)
}

// Unwrap returns the stage's error.
func (e *dependencyError) Unwrap() error { return e.err }

// isDependency reports whether err is a service's failure, not the
// record's: it is returned before the error policy sees it.
func isDependency(err error) bool { return transform.IsUnavailable(err) || transform.IsFatal(err) }

// unavailable aborts the open transaction after a service the chain
// depends on failed, notes the outage, and waits before the next attempt:
// the records are polled again and run again once it answers.
func (p *Pipeline) unavailable(ctx context.Context, de *dependencyError) error {
	o := p.health.noteOutage(de)
	d := p.health.outageWait.At(o.n - 1)
	p.log.Warn("a service the chain depends on failed; no record is failed for it: the transaction is aborted and retried",
		"transform", de.stage, "err", de.err.Error(), "failing_for", time.Since(o.since).Round(time.Millisecond).String(),
		"attempts", o.n, "retry_in", d.String())
	if _, err := p.end(ctx, txn.ReasonUnavailable); err != nil {
		return err
	}
	_ = backoff.Sleep(ctx, d) // ctx ended: the loop sees it
	return nil
}

// noteOutage counts one more aborted transaction into the outage and
// returns it.
func (h *health) noteOutage(de *dependencyError) *outage {
	next := &outage{since: time.Now(), n: 1, stage: de.stage, err: de.err}
	if o := h.outage.Load(); o != nil {
		next.since, next.n = o.since, o.n+1
	}
	h.outage.Store(next)
	return next
}

// outageError is Healthy's error for an outage that has lasted longer
// than after; nil otherwise.
func (h *health) outageError(after time.Duration) error {
	o := h.outage.Load()
	if o == nil {
		return nil
	}
	if lasted := time.Since(o.since); lasted > after {
		return fmt.Errorf("a service the chain depends on has failed for %s (%d transactions aborted; no record is failed for it): %s",
			lasted.Round(time.Second), o.n, stageError(o.stage, o.err))
	}
	return nil
}

// outageCause returns the error of the current outage, nil when there is
// none.
func (h *health) outageCause() error {
	if o := h.outage.Load(); o != nil {
		return o.err
	}
	return nil
}
