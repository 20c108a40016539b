package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/txn"
)

// unproducible reports whether a produce error is about the record itself,
// so that retrying can never help.
func unproducible(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.InvalidTimestamp, kerr.TopicAuthorizationFailed, kerr.InvalidTopicException, kerr.PolicyViolation, txn.ErrUnwritable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// notePoison records, after an aborted transaction, the inputs whose
// outputs can never be produced (the broker rejected them for good), so
// that their next attempt goes where the policy says. Outputs to a topic
// the cluster confirms missing need no entry: checkDestinations fails them
// from now on.
//
// A broker rejects a whole batch (the records of one partition in one
// request) for one record too large, so a failure blames its input only
// where every failed record of its partition comes from that input.
// Otherwise the transactions shrink to one input each until the culprit
// fails alone, the way the watchdog shrinks them.
//
// A failure that is no record's doing ends the processor instead of
// failing record after record: a required topic (Options.RequireTopics,
// the dead-letter topic) that the cluster confirms missing, as when it
// was deleted while running, is a *MissingTopicsError; one the principal
// may not write to any more (TOPIC_AUTHORIZATION_FAILED, an ACL removed)
// is a *txn.AccessError.
//
// It returns an error when nothing can be done: the policy is Fail, a
// dead letter failed even without its value, or a required topic is gone
// or refused.
func (p *Pipeline) notePoison(ctx context.Context, failures []txn.Failure) error {
	missing := p.confirmMissing(ctx, failures)
	var gone []string
	for _, t := range p.required() {
		if missing[t] {
			gone = append(gone, t)
		}
	}
	if len(gone) > 0 {
		return &MissingTopicsError{Topics: gone, Deleted: true}
	}
	for _, f := range failures {
		if errors.Is(f.Err, kerr.TopicAuthorizationFailed) && slices.Contains(p.required(), f.Record.Topic) {
			return &txn.AccessError{Kind: txn.AccessDenied, Resource: p.describeTopic(f.Record.Topic), Err: f.Err}
		}
	}
	type blame struct {
		in        inflight
		topic     string // where its output went
		cause     error
		ambiguous bool
	}
	find := p.open.sent.finder()
	byPart := map[topicPartition]*blame{}
	alone := map[record.Source]struct{}{}
	var order []topicPartition
	for _, f := range failures {
		if !unproducible(f.Err) {
			continue // transient, or a missing topic: the retry deals with it
		}
		in, ok := find(f.Record)
		if !ok {
			if p.st.s != nil && slices.Contains(p.st.s.Topics(), f.Record.Topic) {
				// A changelog record: the state of many inputs, no one
				// input's doing (a state write too large for the topic
				// fails its record when it is written). No retry of the
				// transaction would fare better.
				return &StateWriteError{Topic: f.Record.Topic, Err: f.Err}
			}
			continue
		}
		tp := topicPartition{f.Record.Topic, f.Record.Partition}
		if limit := p.s.MaxRecordBytes(tp.topic); limit > 0 && wireBytes(f.Record) > limit {
			// Too large on its own: the producer refused it alone, and
			// the others of its partition failed (if they did) with it.
			if _, done := alone[in.src]; !done {
				alone[in.src] = struct{}{}
				if err := p.poisonInput(in, tp.topic, f.Err); err != nil {
					return err
				}
			}
			continue
		}
		switch b, seen := byPart[tp]; {
		case !seen:
			byPart[tp] = &blame{in: in, topic: tp.topic, cause: f.Err}
			order = append(order, tp)
		case b.in.src != in.src:
			b.ambiguous = true
		}
	}
	shrink := false
	for _, tp := range order {
		b := byPart[tp]
		if b.ambiguous {
			shrink = true
			continue
		}
		if err := p.poisonInput(b.in, b.topic, b.cause); err != nil {
			return err
		}
	}
	if shrink && p.pace.max > 1 {
		p.pace.max = 1
		p.log.Warn("the broker rejected a batch holding the outputs of several inputs; retrying one input per transaction to find the one at fault")
	}
	return nil
}

// StateWriteError ends the processor when the cluster refuses, for good, a
// record of a state changelog: the topic's configuration changed under
// it (a smaller max.message.bytes, a policy), which no retry can mend.
type StateWriteError struct {
	Topic string
	Err   error
}

func (e *StateWriteError) Error() string {
	return fmt.Sprintf("the state changelog topic %s refused a record: %v; check the topic's configuration (max.message.bytes, cleanup.policy=compact) and restart", e.Topic, e.Err)
}

// Unwrap returns the produce error.
func (e *StateWriteError) Unwrap() error { return e.Err }

// required returns the topics that must exist for the processor to go on:
// Options.RequireTopics, the dead-letter topic and the state's changelogs.
func (p *Pipeline) required() []string {
	req := p.o.RequireTopics
	if p.o.OnError == DeadLetter && !slices.Contains(req, p.o.DLQTopic) {
		req = append(slices.Clip(req), p.o.DLQTopic)
	}
	if p.st.s != nil {
		req = append(slices.Clip(req), p.st.s.Topics()...)
	}
	return req
}

// describeTopic names a required topic by its role.
func (p *Pipeline) describeTopic(t string) string {
	switch t {
	case p.o.OutputTopic:
		return fmt.Sprintf("output topic %q", t)
	case p.o.DLQTopic:
		return fmt.Sprintf("dead-letter topic %q", t)
	}
	if p.st.s != nil && slices.Contains(p.st.s.Topics(), t) {
		return fmt.Sprintf("state changelog topic %q", t)
	}
	return fmt.Sprintf("routed topic %q", t)
}

// poisonInput records that in's output to topic could not be produced
// because of cause, or returns the error that ends the processor.
func (p *Pipeline) poisonInput(in inflight, topic string, cause error) error {
	prev, seen := p.book.poison[in.src]
	switch {
	case in.dead != nil && seen && prev.dlqFailed:
		return &RecordError{Source: in.src, Err: fmt.Errorf("its dead letter cannot be written to %s even without its value (the record failed with: %v): %w",
			topic, in.dead.err, cause)}
	case in.dead != nil:
		p.book.poison[in.src] = poison{failure: *in.dead, dlqFailed: true}
	case p.o.OnError == Fail:
		return &RecordError{Source: in.src, Err: fmt.Errorf("its output cannot be produced to %s: %w", topic, cause)}
	default:
		p.book.poison[in.src] = poison{failure: failure{stage: stageProduce, attempts: 1,
			err: fmt.Errorf("output to %s cannot be produced: %w", topic, cause)}}
	}
	p.log.Warn("a record's output cannot be produced; the transaction is retried without it",
		"topic", in.src.Topic, "partition", in.src.Partition, "offset", in.src.Offset, "policy", string(p.o.OnError), "err", cause.Error())
	return nil
}

// confirmMissing asks the cluster about the topics that failures blame as
// unknown (with a fresh metadata request, so that a topic still being
// created is not mistaken for a missing one), and returns those it
// confirms missing, also remembered in p.book.missing so that records routed
// there fail without an abort. A cluster that cannot answer confirms
// nothing.
func (p *Pipeline) confirmMissing(ctx context.Context, failures []txn.Failure) map[string]bool {
	var unknown []string
	for _, f := range failures {
		if (errors.Is(f.Err, kerr.UnknownTopicOrPartition) || errors.Is(f.Err, kerr.UnknownTopicID)) && !slices.Contains(unknown, f.Record.Topic) {
			unknown = append(unknown, f.Record.Topic)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	gone, err := p.s.MissingTopics(cctx, unknown)
	if err != nil {
		p.log.Warn("could not check whether output topics exist; retrying the transaction", "topics", unknown, "err", err.Error())
		return nil
	}
	confirmed := make(map[string]bool, len(gone))
	for _, t := range gone {
		confirmed[t] = true
		p.book.missing[t] = time.Now()
	}
	return confirmed
}
