package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/sink"
)

// How a batch ends, whatever the committer: the metrics and the abort
// reason, and the rebuild after an ending whose outcome is unknown.

// FencedError is returned when the producer was fenced again soon after a
// rebuild: another live instance holds the same transactional ID.
type FencedError struct {
	TransactionalID string
	Window          time.Duration
	Err             error
}

// Error says that another instance uses the same transactional ID. The
// processor adds which variable sets it (see Hint).
func (e *FencedError) Error() string { return e.Hint("") }

// Hint is Error's line with fix, a sentence saying how to give every
// instance its own transactional ID, after the ID ("" for none).
func (e *FencedError) Hint(fix string) string {
	if fix != "" {
		fix = "; " + fix
	}
	return fmt.Sprintf("producer fenced twice within %s: another live instance is using transactional ID %q%s (%v)",
		e.Window, e.TransactionalID, fix, e.Err)
}

// Unwrap returns the broker's error.
func (e *FencedError) Unwrap() error { return e.Err }

// ErrRebuilt is returned by Begin when the producer had failed and the
// session was rebuilt: records polled before the call belong to the old
// client and must be dropped; the new one fetches them again from the
// committed offsets.
var ErrRebuilt = errors.New("transactional session rebuilt")

// End ends the open transaction: it commits when abort is empty, and
// aborts with that reason otherwise. records is the number of input
// records the transaction covered.
//
// It returns whether the transaction committed. An abort, asked for or not,
// leaves the session rewound to the last committed offsets, so the aborted
// input is consumed again. When ending fails (outcome unknown, or the
// producer was fenced), End rebuilds the session and returns nil; the
// returned error is fatal: a *FencedError, a *sink.PersistentError (with a
// Destination, a failure no retry fixes), or ctx's error.
//
// Canceling ctx does not cut the ending short, which would leave its
// outcome unknown: ending is bounded by the transaction timeout instead.
// ctx bounds the rebuild that may follow.
func (s *Session) End(ctx context.Context, records int, abort Reason) (bool, error) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.TransactionTimeout)
	defer cancel()
	ectx = s.commitContext(ectx)
	committed, decided, detail, err := s.c.end(ectx, abort, s.begun)
	if !committed || err != nil {
		s.resumeStopped() // rewound below the stops
	}
	s.clock.ended(committed && err == nil)
	if s.crash != nil {
		s.crash.ended(s.cl, committed && err == nil, err != nil)
	}
	if decided != "" {
		abort = decided
	}
	// Every record of the transaction has been acknowledged or failed by
	// now (End flushes, or fails what is buffered), so no error of this
	// transaction can reach the next one's.
	s.out.produceErr.Store(nil)
	s.inTxn = false
	s.m.openSince.Store(0)
	age := time.Since(s.begun)
	s.m.Duration.Observe(age.Seconds())
	rebalanced := s.rebalanced.Swap(false)
	switch {
	case err == nil && committed:
		s.m.Committed.Inc()
		s.m.Records.Observe(float64(records))
		now := time.Now().UnixNano()
		s.m.lastCommit.Store(now)
		s.m.LastCommit.Set(float64(now) / 1e9)
		return true, nil
	case err == nil:
		if abort == "" {
			abort = ReasonOffsetCommit
			switch {
			case rebalanced:
				abort = ReasonRebalance
			case s.timedOut(age): // so its offset commit was refused
				abort = ReasonTimeout
			}
		}
		s.m.countAbort(abort, detail)
		s.log.Info("transaction aborted; its input will be processed again", "reason", string(abort), "records", records)
		return false, nil
	}
	var persistent *sink.PersistentError
	if errors.As(err, &persistent) { // a rebuild cannot fix the destination's refusal
		s.m.countAbort(ReasonEndError, err.Error())
		return false, err
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("ending the transaction: %w", ctx.Err())
	}
	return false, s.recover(ctx, records, age, err)
}

// recover handles a failed producer: it counts the abort, exits on
// repeated fencing, and otherwise rebuilds the session. age is how long
// the failed transaction had been open (0 when none was): a transaction
// open for the transaction timeout was aborted by the broker, which bumps
// the producer epoch, so the fencing error that follows is our own
// timeout and not another instance.
func (s *Session) recover(ctx context.Context, records int, age time.Duration, err error) error {
	reason := ReasonEndError
	switch {
	case IsFenced(err) && s.timedOut(age):
		reason = ReasonTimeout
	case IsFenced(err):
		reason = ReasonFenced
		s.m.Fenced.Inc()
		now := time.Now()
		if !s.lastFence.IsZero() && now.Sub(s.lastFence) < s.opts.FenceWindow {
			s.m.countAbort(reason, err.Error())
			return &FencedError{TransactionalID: s.opts.TransactionalID, Window: s.opts.FenceWindow, Err: err}
		}
		s.lastFence = now
	}
	s.m.countAbort(reason, err.Error())
	s.log.Warn("the transaction failed; rebuilding the session with a new producer epoch",
		"reason", string(reason), "records", records, "err", err.Error())
	return s.rebuild(ctx)
}

// timedOut reports whether a transaction open for age has outlived the
// transaction timeout, at which the broker aborts it and bumps the
// producer epoch: what fails after that is our own timeout, neither a
// refused offset commit nor another instance.
func (s *Session) timedOut(age time.Duration) bool { return age >= s.opts.TransactionTimeout }

// IsFenced reports whether err means a newer producer with the same
// transactional ID has taken over.
func IsFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.FencedInstanceID)
}

// rebuild replaces the client: the old one leaves, the new one rejoins the
// group and initialises the producer, which aborts whatever the old epoch
// left open.
func (s *Session) rebuild(ctx context.Context) error {
	if s.crash != nil {
		s.crash.doubt() // the failed ending may have committed: write nothing back
	}
	s.producerReady.Store(false)
	s.joined.Store(false)
	s.leave()
	s.c.close()
	s.stopped = nil // the new client fetches everything
	if err := s.open(); err != nil {
		return err
	}
	s.epoch.Add(1)
	return s.Init(ctx)
}
