package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// Error classes: the class label of processor_transform_errors_total.
const (
	classPermanent = "permanent"
	classRetriable = "retriable"
	classTimeout   = "timeout"
	classPanic     = "panic"
	// classUnavailable: a service the transform depends on failed
	// (transform.Unavailable, transform.Fatal); not the record's fault.
	classUnavailable = "unavailable"
)

// errWatchdog ends a transaction that ran out of its time budget.
var errWatchdog = errors.New("transaction time budget used up")

// stageProduce is the failed stage of a record whose output could not be
// written: the broker rejected it, its topic does not exist, or it was
// routed to an input or the dead-letter topic.
const stageProduce = "produce"

// Retry backoff: the wait before a record's n-th retry (from 0) lies
// between half and all of min(maxBackoff, firstBackoff·2ⁿ), drawn at
// random. Equal jitter, not full: a record has a bounded number of
// retries, and their waits together must give a failing dependency a
// guaranteed time (at least half the ceilings' sum) before the record
// fails for good.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = time.Second
)

// retryPolicy is the bounds of the waits between a record's attempts.
func retryPolicy() backoff.Policy {
	return backoff.Policy{Base: firstBackoff, Cap: maxBackoff, Jitter: backoff.Equal}
}

// runChain runs r through w's chain under w's context (the open
// transaction's, which the monitor may cut for this record), retrying
// retriable failures with backoff up to MaxRetries times, and checks where
// the outputs go. It returns dst with the outputs appended; or dst as given
// and, with r restored to how it arrived, the final error (clipped to
// maxQuote bytes), the chain entry that failed and the number of attempts.
// It is safe to call from several goroutines, each with its own worker,
// while the loop waits for them.
//
// A record the monitor cut (it ran for its limit) fails with the
// *limitError, whatever the chain returned: it is not retried, as no
// second attempt of that length could fit the budget. When the
// transaction's budget runs out first (a deadline the processor set, not
// the record's doing) the error is errWatchdog, and no retry starts that
// could not end within the budget.
func (p *Pipeline) runChain(w *worker, src record.Source, r *kgo.Record, dst []*kgo.Record) (out []*kgo.Record, stage string, attempts int, err error) {
	chain := w.chain
	if w.after != nil && p.fromHop(src.Topic) {
		chain = w.after
	}
	csrc := src // the source the chain sees
	if p.o.Replay {
		csrc = replayOrigin(src, r)
	}
	key, value, headers, ts := r.Key, r.Value, r.Headers, r.Timestamp
	defer func() {
		if err != nil {
			r.Key, r.Value, r.Headers, r.Timestamp = key, value, headers, ts
		}
	}()
	for attempt := 1; ; attempt++ {
		if attempt > 1 && w.stores != nil {
			w.stores.j.Undo() // the failed attempt's state writes
		}
		rctx, cancel := w.ctx, context.CancelFunc(nil)
		if p.o.TransformTimeout > 0 {
			rctx, cancel = context.WithTimeout(w.ctx, p.o.TransformTimeout)
		}
		out, err = chain.Process(rctx, csrc, r, dst)
		timedOut := err != nil && rctx.Err() != nil
		if cancel != nil {
			cancel()
		}
		if le := limitCause(w.ctx); le != nil {
			return dst, p.cutStage(chain, out, dst, err), attempt, le
		}
		if err == nil {
			if err = p.checkDestinations(out[len(dst):], w.after != nil && chain == w.chain); err != nil {
				clear(out[len(dst):])
				return dst, stageProduce, attempt, clipErr(err)
			}
			return out, "", attempt, nil
		}
		var te *transform.Error
		if errors.As(err, &te) {
			stage = te.Stage
		}
		if p.open.ctx.Err() != nil {
			return dst, stage, attempt, errWatchdog
		}
		if isDependency(err) {
			p.o.Metrics.TransformErrors.WithLabelValues(stage, classUnavailable).Inc()
			return dst, stage, attempt, err // not clipped: Healthy and the log show it whole
		}
		var class string
		class, err = p.classify(src, stage, err, timedOut)
		p.o.Metrics.TransformErrors.WithLabelValues(stage, class).Inc()
		if retry := class == classRetriable || class == classTimeout; !retry || attempt > p.o.MaxRetries {
			return dst, stage, attempt, clipErr(err)
		}
		wait := p.retryWait.At(attempt - 1)
		if time.Now().Add(wait).After(p.budgetEnd()) {
			return dst, stage, attempt, errWatchdog
		}
		p.o.Metrics.Retries.Inc()
		t := time.NewTimer(wait)
		select {
		case <-w.ctx.Done():
			t.Stop()
			if le := limitCause(w.ctx); le != nil {
				p.o.Metrics.TransformErrors.WithLabelValues(stage, classTimeout).Inc()
				return dst, stage, attempt, le
			}
			return dst, stage, attempt, errWatchdog
		case <-t.C:
		}
		r.Key, r.Value, r.Headers, r.Timestamp, r.Topic = key, value, headers, ts, ""
	}
}

// classify returns the class of a failed attempt's error (the label of
// processor_transform_errors_total) and the error to report: a timed-out
// one names the setting that bounded it. A panic's stack is logged at
// debug level.
func (p *Pipeline) classify(src record.Source, stage string, err error, timedOut bool) (string, error) {
	var pe *transform.PanicError
	switch {
	case errors.As(err, &pe):
		p.log.Debug("transform panic stack", "transform", stage, "topic", src.Topic, "partition", src.Partition,
			"offset", src.Offset, "panic", clip(fmt.Sprint(pe.Value)), "stack", string(pe.Stack))
		return classPanic, err
	case timedOut:
		return classTimeout, &timeoutError{err: err, timeout: p.o.TransformTimeout, setting: p.names.transformTimeout}
	case transform.IsRetriable(err):
		return classRetriable, err
	}
	return classPermanent, err
}

// timeoutError is the error of an attempt that ran into TransformTimeout:
// it names the setting that bounded it, the way the user sets it.
type timeoutError struct {
	err     error
	timeout time.Duration
	setting string // TransformTimeout's name (Options.SettingName)
}

func (e *timeoutError) Error() string { return fmt.Sprintf("%v (%s=%s)", e.err, e.setting, e.timeout) }

// Unwrap returns the chain's error.
func (e *timeoutError) Unwrap() error { return e.err }

// cutStage counts the failure of a record the monitor cut and returns the
// chain entry it was cut in: the one that failed, or the one running when
// the chain returned outputs anyway (they are dropped).
func (p *Pipeline) cutStage(chain *transform.Chain, out, dst []*kgo.Record, err error) string {
	var stage string
	var te *transform.Error
	if err != nil && errors.As(err, &te) {
		stage = te.Stage
	} else {
		clear(out[len(dst):])
		stage = chain.Running().String()
	}
	p.o.Metrics.TransformErrors.WithLabelValues(stage, classTimeout).Inc()
	return stage
}

// missingTTL is how long a destination topic the cluster confirmed missing
// fails records without another produce attempt; after it, the next
// record routed there tries again (the topic may have been created).
const missingTTL = 30 * time.Second

// checkDestinations fails a record whose outputs go where they must not:
// to an input topic or the dead-letter topic (the processor would consume
// its own output, or mix outputs into its dead letters), or to a topic the
// cluster recently confirmed missing. Per routed output it costs a few
// string comparisons. hopOut says the outputs are the first segment's of
// a hop, which go to the repartition topic.
func (p *Pipeline) checkDestinations(out []*kgo.Record, hopOut bool) error {
	for _, o := range out {
		t := o.Topic
		if t == "" {
			continue
		}
		if t == p.o.DLQTopic {
			return fmt.Errorf("an output is routed to the dead-letter topic %q; route it to another topic", t)
		}
		for _, in := range p.o.InputTopics {
			if t == in && !(hopOut && p.fromHop(t)) {
				return fmt.Errorf("an output is routed to the input topic %q, which would feed it back into the processor", t)
			}
		}
		if len(p.book.missing) > 0 {
			if at, ok := p.book.missing[t]; ok && time.Since(at) < missingTTL {
				return fmt.Errorf("an output is routed to topic %q, which does not exist; create it or change the routing", t)
			}
		}
	}
	return nil
}
