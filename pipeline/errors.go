package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// OnError is what happens to an input record that fails for good: its
// transform failed permanently (after retries), panicked, or its output
// can never be produced.
type OnError string

// Error policies (PROCESSOR_ON_ERROR).
const (
	// Fail aborts the transaction and stops the processor; nothing from
	// the bad record on is committed, and a restart meets it again.
	Fail OnError = "fail"
	// DeadLetter writes the record, with its error, to the dead-letter
	// topic in the same transaction as the other outputs and the offsets.
	DeadLetter OnError = "dlq"
	// Skip drops the record, counts and logs it: at-most-once for that
	// record, by choice.
	Skip OnError = "skip"
)

// Dead-letter header keys, added to the original record's headers (with
// the lineage headers).
const (
	HeaderError             = "processor.error"               // the error message
	HeaderErrorTransform    = "processor.error.transform"     // the chain entry that failed; "produce" when the output could not be written
	HeaderErrorAttempts     = "processor.error.attempts"      // how many times the chain ran on the record, ASCII decimal
	HeaderErrorValueDropped = "processor.error.value.dropped" // set when the value was dropped because the dead letter itself could not be written; says why
)

// Error classes: the class label of processor_transform_errors_total.
const (
	classPermanent = "permanent"
	classRetriable = "retriable"
	classTimeout   = "timeout"
	classPanic     = "panic"
)

// errWatchdog ends a transaction that ran out of its time budget.
var errWatchdog = errors.New("transaction time budget used up")

// poison is an input record whose output could not be produced, so that
// its next attempt goes where the policy says instead of to the output.
type poison struct {
	err       error
	dlqFailed bool // its dead letter could not be written either
}

// inflight links a produced record to its input, for the rare case that
// producing it fails for good.
type inflight struct {
	r   *kgo.Record
	src transform.Source
	dlq bool
}

// runChain runs r through the chain, retrying retriable failures with
// backoff up to MaxRetries times within the transaction's budget. It
// returns the outputs; or, with r restored to how it arrived, the final
// error, the chain entry that failed and the number of attempts.
func (p *Pipeline) runChain(ctx context.Context, src transform.Source, r *kgo.Record) (out []*kgo.Record, stage string, attempts int, err error) {
	key, value, headers, ts := r.Key, r.Value, r.Headers, r.Timestamp
	defer func() {
		if err != nil {
			r.Key, r.Value, r.Headers, r.Timestamp = key, value, headers, ts
		}
	}()
	backoff := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		rctx, cancel := ctx, context.CancelFunc(nil)
		if p.o.TransformTimeout > 0 {
			rctx, cancel = context.WithTimeout(ctx, p.o.TransformTimeout)
		}
		out, err = p.chain.Process(rctx, src, r, p.out[:0])
		timedOut := err != nil && rctx.Err() != nil && ctx.Err() == nil
		if cancel != nil {
			cancel()
		}
		p.out = out[:0]
		if err == nil {
			return out, "", attempt, nil
		}
		class := classPermanent
		var te *transform.Error
		if errors.As(err, &te) {
			stage = te.Stage
		}
		var pe *transform.PanicError
		switch {
		case errors.As(err, &pe):
			class = classPanic
			p.log.Debug("transform panic stack", "transform", stage, "topic", src.Topic, "partition", src.Partition,
				"offset", src.Offset, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		case timedOut:
			class = classTimeout
			err = fmt.Errorf("%w (PROCESSOR_TRANSFORM_TIMEOUT=%s)", err, p.o.TransformTimeout)
		case transform.IsRetriable(err):
			class = classRetriable
		}
		p.o.Metrics.TransformErrors.WithLabelValues(stage, class).Inc()
		retry := class == classRetriable || class == classTimeout
		if !retry || attempt > p.o.MaxRetries || time.Now().Add(backoff).After(p.budgetEnd()) || ctx.Err() != nil {
			return nil, stage, attempt, err
		}
		p.o.Metrics.Retries.Inc()
		select {
		case <-ctx.Done():
			return nil, stage, attempt, err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
		r.Key, r.Value, r.Headers, r.Timestamp, r.Topic = key, value, headers, ts, ""
	}
}

// budgetEnd is when the open transaction must start ending, so that it
// ends before the transaction timeout would abort it and fence us.
func (p *Pipeline) budgetEnd() time.Time {
	return p.s.Begun().Add(p.o.TxnBudget)
}

// failed applies the error policy to an input record that failed for good:
// its chain entry stage failed after attempts runs, or (stage "produce") its
// output could not be produced. dropValue, when set, says why its dead
// letter goes without the value. Only Fail returns an error.
func (p *Pipeline) failed(src transform.Source, r *kgo.Record, stage string, attempts int, err error, dropValue string) error {
	switch p.o.OnError {
	case DeadLetter:
		p.deadLetter(src, r, stage, attempts, err, dropValue)
		return nil
	case Skip:
		p.txnSkipped++
		p.log.Warn("skipping a record that failed (PROCESSOR_ON_ERROR=skip): it will not be processed again",
			"topic", src.Topic, "partition", src.Partition, "offset", src.Offset, "transform", stage, "attempts", attempts, "err", err.Error())
		return nil
	}
	return &RecordError{Source: src, Err: err}
}

// deadLetter writes the input record as it arrived, with the error headers
// and lineage, to the dead-letter topic in the open transaction.
// dropValue, when set, drops the value and says why.
func (p *Pipeline) deadLetter(src transform.Source, r *kgo.Record, stage string, attempts int, err error, dropValue string) {
	r.Headers = deadLetterHeaders(r.Headers, stage, attempts, err, dropValue)
	if dropValue != "" {
		r.Value = nil
	}
	r.Topic = p.o.DLQTopic
	p.dlqLineage.stamp(r, src)
	p.txnDLQ++
	p.inflight = append(p.inflight, inflight{r: r, src: src, dlq: true})
	p.s.Produce(r)
}

// deadLetterHeaders returns a new header slice: the original headers
// (without error headers of an earlier dead-lettering, as when a replayed
// dead letter fails again) plus the error headers.
func deadLetterHeaders(orig []kgo.RecordHeader, stage string, attempts int, err error, dropValue string) []kgo.RecordHeader {
	hdrs := make([]kgo.RecordHeader, 0, len(orig)+4)
	for _, h := range orig {
		switch h.Key {
		case HeaderError, HeaderErrorTransform, HeaderErrorAttempts, HeaderErrorValueDropped:
		default:
			hdrs = append(hdrs, h)
		}
	}
	hdrs = append(hdrs,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(err.Error())},
		kgo.RecordHeader{Key: HeaderErrorTransform, Value: []byte(stage)},
		kgo.RecordHeader{Key: HeaderErrorAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
	)
	if dropValue != "" {
		hdrs = append(hdrs, kgo.RecordHeader{Key: HeaderErrorValueDropped, Value: []byte(dropValue)})
	}
	return hdrs
}

// unproducible reports whether a produce error is about the record itself,
// so that retrying can never help.
func unproducible(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.InvalidTimestamp, kerr.TopicAuthorizationFailed, kerr.InvalidTopicException, kerr.PolicyViolation} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// notePoison records, after an aborted transaction, the inputs whose
// outputs could not be produced at all. It returns an error when nothing
// can be done: the policy is Fail, or a dead letter failed even without
// its value.
func (p *Pipeline) notePoison(failures []txn.Failure) error {
	for _, f := range failures {
		if !unproducible(f.Err) {
			continue // transient: the retry of the transaction may pass
		}
		for _, in := range p.inflight {
			if in.r != f.Record {
				continue
			}
			prev, seen := p.poison[in.src]
			switch {
			case in.dlq && seen && prev.dlqFailed:
				return &RecordError{Source: in.src, Err: fmt.Errorf("its dead letter cannot be written even without its value: %w", f.Err)}
			case in.dlq:
				p.poison[in.src] = poison{err: prev.err, dlqFailed: true}
			case p.o.OnError == Fail:
				return &RecordError{Source: in.src, Err: fmt.Errorf("its output cannot be produced to %s: %w", f.Record.Topic, f.Err)}
			default:
				p.poison[in.src] = poison{err: fmt.Errorf("output to %s cannot be produced: %w", f.Record.Topic, f.Err)}
			}
			p.log.Warn("a record's output cannot be produced; the transaction is retried without it",
				"topic", in.src.Topic, "partition", in.src.Partition, "offset", in.src.Offset, "policy", string(p.o.OnError), "err", f.Err.Error())
			break
		}
	}
	return nil
}
