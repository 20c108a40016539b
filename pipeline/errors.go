package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
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
	HeaderError             = record.HeaderError             // the error message
	HeaderErrorTransform    = record.HeaderErrorTransform    // the chain entry that failed; "produce" when the output could not be written
	HeaderErrorAttempts     = record.HeaderErrorAttempts     // how many times the chain ran on the record, ASCII decimal
	HeaderErrorValueDropped = record.HeaderErrorValueDropped // set when the value was dropped because the dead letter itself could not be written; says why
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

// stageProduce is the failed stage of a record whose output could not be
// written: the broker rejected it, its topic does not exist, or it was
// routed to an input or the dead-letter topic.
const stageProduce = "produce"

// failure is why an input record failed for good.
type failure struct {
	stage    string // the chain entry that failed, or stageProduce
	attempts int
	err      error
}

// poison is an input record that failed for good in an aborted attempt
// (its output could not be produced, its dead letter could not be written,
// or it alone used up the transaction's budget), so that its next attempt
// goes where the policy says.
type poison struct {
	failure
	dlqFailed bool // its dead letter could not be written either
}

// inflight links a produced record to its input, for the rare case that
// producing it fails for good.
type inflight struct {
	r    *kgo.Record
	src  transform.Source
	dead *failure // set on a dead letter: why its input failed
}

// Retry backoff: from firstBackoff, doubling up to maxBackoff.
const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = time.Second
)

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
func (p *Pipeline) runChain(w *worker, src transform.Source, r *kgo.Record, dst []*kgo.Record) (out []*kgo.Record, stage string, attempts int, err error) {
	chain := w.chain
	key, value, headers, ts := r.Key, r.Value, r.Headers, r.Timestamp
	defer func() {
		if err != nil {
			r.Key, r.Value, r.Headers, r.Timestamp = key, value, headers, ts
		}
	}()
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		rctx, cancel := w.ctx, context.CancelFunc(nil)
		if p.o.TransformTimeout > 0 {
			rctx, cancel = context.WithTimeout(w.ctx, p.o.TransformTimeout)
		}
		out, err = chain.Process(rctx, src, r, dst)
		timedOut := err != nil && rctx.Err() != nil
		if cancel != nil {
			cancel()
		}
		if le := limitCause(w.ctx); le != nil {
			return dst, p.cutStage(chain, out, dst, err), attempt, le
		}
		if err == nil {
			if err = p.checkDestinations(out[len(dst):]); err != nil {
				clear(out[len(dst):])
				return dst, stageProduce, attempt, clipErr(err)
			}
			return out, "", attempt, nil
		}
		var te *transform.Error
		if errors.As(err, &te) {
			stage = te.Stage
		}
		if p.txn.Err() != nil {
			return dst, stage, attempt, errWatchdog
		}
		class := classPermanent
		var pe *transform.PanicError
		switch {
		case errors.As(err, &pe):
			class = classPanic
			p.log.Debug("transform panic stack", "transform", stage, "topic", src.Topic, "partition", src.Partition,
				"offset", src.Offset, "panic", clip(fmt.Sprint(pe.Value)), "stack", string(pe.Stack))
		case timedOut:
			class = classTimeout
			err = fmt.Errorf("%w (PROCESSOR_TRANSFORM_TIMEOUT=%s)", err, p.o.TransformTimeout)
		case transform.IsRetriable(err):
			class = classRetriable
		}
		p.o.Metrics.TransformErrors.WithLabelValues(stage, class).Inc()
		if retry := class == classRetriable || class == classTimeout; !retry || attempt > p.o.MaxRetries {
			return dst, stage, attempt, clipErr(err)
		}
		if time.Now().Add(backoff).After(p.budgetEnd()) {
			return dst, stage, attempt, errWatchdog
		}
		p.o.Metrics.Retries.Inc()
		t := time.NewTimer(backoff)
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
		backoff = min(backoff*2, maxBackoff)
		r.Key, r.Value, r.Headers, r.Timestamp, r.Topic = key, value, headers, ts, ""
	}
}

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
// string comparisons.
func (p *Pipeline) checkDestinations(out []*kgo.Record) error {
	for _, o := range out {
		t := o.Topic
		if t == "" {
			continue
		}
		if t == p.o.DLQTopic {
			return fmt.Errorf("an output is routed to the dead-letter topic %q; route it to another topic", t)
		}
		for _, in := range p.o.InputTopics {
			if t == in {
				return fmt.Errorf("an output is routed to the input topic %q, which would feed it back into the processor", t)
			}
		}
		if len(p.missing) > 0 {
			if at, ok := p.missing[t]; ok && time.Since(at) < missingTTL {
				return fmt.Errorf("an output is routed to topic %q, which does not exist; create it or change the routing", t)
			}
		}
	}
	return nil
}

// maxQuote bounds how much of an error message the processor repeats in
// logs, /healthz and dead-letter headers: transform errors may quote the
// record (jq quotes the value it failed on), which can be megabytes.
const maxQuote = 256

// clip shortens s to maxQuote bytes, saying how long it was.
func clip(s string) string { return record.Clip(s, maxQuote) }

// clippedError is an error whose message was clipped; errors.Is and As
// still see the original.
type clippedError struct {
	msg string
	err error
}

func (e *clippedError) Error() string { return e.msg }
func (e *clippedError) Unwrap() error { return e.err }

// clipErr returns err, or an error with its message clipped to maxQuote.
func clipErr(err error) error {
	if msg := err.Error(); len(msg) > maxQuote {
		return &clippedError{msg: clip(msg), err: err}
	}
	return err
}

// BudgetError is returned by New when one record's worst case, every
// attempt running to its deadline plus the backoff between retries, does
// not fit the transaction's time budget: such a record could never be
// processed, nor be failed by the policy, within a transaction.
type BudgetError struct {
	Worst, Budget time.Duration
	Attempts      int             // 1 + MaxRetries
	PerAttempt    time.Duration   // the longest one attempt may take
	Entry         transform.Entry // the chain entry whose own deadline is PerAttempt; zero when it is TransformTimeout or there is none
}

func (e *BudgetError) Error() string {
	if e.PerAttempt == 0 {
		return fmt.Sprintf("the backoff between one record's %d retries adds up to %s, which does not fit the transaction's time budget of %s",
			e.Attempts-1, e.Worst, e.Budget)
	}
	return fmt.Sprintf("one record may take %s (%d attempts of up to %s each, plus backoff between retries), which does not fit the transaction's time budget of %s",
		e.Worst, e.Attempts, e.PerAttempt, e.Budget)
}

// CheckBudget returns a *BudgetError when one record's retries cannot fit
// the transaction's time budget (New checks it too; a caller can check
// before it connects anything). An attempt is bounded by TransformTimeout
// and by the chain's own deadlines (a stage with its own deadline may not
// watch the context).
//
// A record that passes the check is never cut before its own deadlines
// end it: each record may run for the longer of this worst case and half
// the budget, all its attempts together, before it fails under
// PROCESSOR_ON_ERROR as the one that holds up the transaction.
func CheckBudget(o Options, chain *transform.Chain) error {
	o.TxnBudget = o.budget()
	worst, per, entry := worstCase(o, chain)
	if worst >= o.TxnBudget {
		return &BudgetError{Worst: worst, Budget: o.TxnBudget, Attempts: o.MaxRetries + 1, PerAttempt: per, Entry: entry}
	}
	return nil
}

// worstCase is the longest one record may take by the configured
// deadlines, every attempt running to its deadline plus the backoff
// between retries; per is the longest attempt, and entry the chain entry
// whose own deadline it is (zero for TransformTimeout or none).
func worstCase(o Options, chain *transform.Chain) (worst, per time.Duration, entry transform.Entry) {
	per, entry = chain.CallTimeout()
	if o.TransformTimeout >= per {
		per, entry = o.TransformTimeout, transform.Entry{}
	}
	worst = time.Duration(o.MaxRetries+1) * per
	for i, b := 0, firstBackoff; i < o.MaxRetries; i, b = i+1, min(b*2, maxBackoff) {
		worst += b
	}
	return worst, per, entry
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
		p.cur.skipped++
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
	if dropValue == "" {
		p.fitDeadLetter(r)
	}
	p.cur.dlq++
	p.inflight = append(p.inflight, inflight{r: r, src: src, dead: &failure{stage: stage, attempts: attempts, err: err}})
	p.s.ProduceDeadLetter(p.work, r, src, txn.DeadLetter{Stage: stage, Attempts: attempts, Err: err})
}

// minErrorQuote is the least of the error message a dead letter keeps
// when its headers are clipped to make it fit its topic.
const minErrorQuote = 64

// fitDeadLetter makes the dead letter r fit the producer's limit for the
// dead-letter topic (its max.message.bytes) when it is over it: first by
// clipping the processor.error header, down to minErrorQuote bytes; when
// that is not enough, by dropping the value, saying so in
// processor.error.value.dropped. A dead letter that does not fit even so
// fails to produce, and the policy's last resort applies (see
// poisonInput). The input itself fitted its own topic's limit, so with
// limits alike only the headers the processor adds can push it over.
func (p *Pipeline) fitDeadLetter(r *kgo.Record) {
	limit := p.s.MaxRecordBytes(r.Topic)
	over := wireBytes(r) - limit
	if limit <= 0 || over <= 0 {
		return
	}
	for i := range r.Headers {
		h := &r.Headers[i]
		if h.Key != HeaderError {
			continue
		}
		if keep := len(h.Value) - over; keep >= minErrorQuote {
			h.Value = []byte(clipTo(string(h.Value), keep))
			return
		}
		h.Value = []byte(clipTo(string(h.Value), minErrorQuote))
	}
	size := wireBytes(r)
	r.Value = nil
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderErrorValueDropped, Value: []byte(fmt.Sprintf(
		"the dead letter with its value (%d bytes encoded) is larger than the %d bytes the dead-letter topic takes (max.message.bytes)", size, limit))})
}

// wireBytes is what r takes encoded alone in a record batch (Kafka's
// format v2), batch header included, as the producer counts it against
// its limit before compression; the broker measures the same batch
// (4 bytes less) against max.message.bytes.
func wireBytes(r *kgo.Record) int {
	const batch = 65 // the batch header as franz-go counts it
	body := 3 +      // attributes; timestamp and offset deltas, 0 for a batch's first record
		varintLen(len(r.Key)) + len(r.Key) + varintLen(len(r.Value)) + len(r.Value) + varintLen(len(r.Headers))
	for _, h := range r.Headers {
		body += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return batch + varintLen(body) + body
}

// varintLen is the length of n as a zigzag varint.
func varintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], int64(n))
}

// clipTo shortens s to at most n bytes, the note of how long it was
// included, at a rune boundary.
func clipTo(s string, n int) string { return record.ClipWithin(s, n) }

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
		cause     error
		ambiguous bool
	}
	var at map[*kgo.Record]int
	byPart := map[topicPartition]*blame{}
	alone := map[transform.Source]struct{}{}
	var order []topicPartition
	for _, f := range failures {
		if !unproducible(f.Err) {
			continue // transient, or a missing topic: the retry deals with it
		}
		if at == nil {
			at = make(map[*kgo.Record]int, len(p.inflight))
			for i, in := range p.inflight {
				at[in.r] = i
			}
		}
		i, ok := at[f.Record]
		if !ok {
			continue
		}
		in, tp := p.inflight[i], topicPartition{f.Record.Topic, f.Record.Partition}
		if limit := p.s.MaxRecordBytes(tp.topic); limit > 0 && wireBytes(f.Record) > limit {
			// Too large on its own: the producer refused it alone, and
			// the others of its partition failed (if they did) with it.
			if _, done := alone[in.src]; !done {
				alone[in.src] = struct{}{}
				if err := p.poisonInput(in, f.Err); err != nil {
					return err
				}
			}
			continue
		}
		switch b, seen := byPart[tp]; {
		case !seen:
			byPart[tp] = &blame{in: in, cause: f.Err}
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
		if err := p.poisonInput(b.in, b.cause); err != nil {
			return err
		}
	}
	if shrink && p.txnMax > 1 {
		p.txnMax = 1
		p.log.Warn("the broker rejected a batch holding the outputs of several inputs; retrying one input per transaction to find the one at fault")
	}
	return nil
}

// required returns the topics that must exist for the processor to go on:
// Options.RequireTopics and the dead-letter topic.
func (p *Pipeline) required() []string {
	if p.o.OnError != DeadLetter || slices.Contains(p.o.RequireTopics, p.o.DLQTopic) {
		return p.o.RequireTopics
	}
	return append(slices.Clip(p.o.RequireTopics), p.o.DLQTopic)
}

// describeTopic names a required topic by its role.
func (p *Pipeline) describeTopic(t string) string {
	switch t {
	case p.o.OutputTopic:
		return fmt.Sprintf("output topic %q", t)
	case p.o.DLQTopic:
		return fmt.Sprintf("dead-letter topic %q", t)
	}
	return fmt.Sprintf("routed topic %q", t)
}

// poisonInput records that in's output could not be produced because of
// cause, or returns the error that ends the processor.
func (p *Pipeline) poisonInput(in inflight, cause error) error {
	topic := in.r.Topic
	prev, seen := p.poison[in.src]
	switch {
	case in.dead != nil && seen && prev.dlqFailed:
		return &RecordError{Source: in.src, Err: fmt.Errorf("its dead letter cannot be written to %s even without its value (the record failed with: %v): %w",
			topic, in.dead.err, cause)}
	case in.dead != nil:
		p.poison[in.src] = poison{failure: *in.dead, dlqFailed: true}
	case p.o.OnError == Fail:
		return &RecordError{Source: in.src, Err: fmt.Errorf("its output cannot be produced to %s: %w", topic, cause)}
	default:
		p.poison[in.src] = poison{failure: failure{stage: stageProduce, attempts: 1,
			err: fmt.Errorf("output to %s cannot be produced: %w", topic, cause)}}
	}
	p.log.Warn("a record's output cannot be produced; the transaction is retried without it",
		"topic", in.src.Topic, "partition", in.src.Partition, "offset", in.src.Offset, "policy", string(p.o.OnError), "err", cause.Error())
	return nil
}

// confirmMissing asks the cluster about the topics that failures blame as
// unknown (with a fresh metadata request, so that a topic still being
// created is not mistaken for a missing one), and returns those it
// confirms missing, also remembered in p.missing so that records routed
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
		p.missing[t] = time.Now()
	}
	return confirmed
}
