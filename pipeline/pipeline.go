// Package pipeline is the processor's loop: poll input records, run each
// through the transform chain, produce the outputs, and end the transaction
// after PROCESSOR_COMMIT_INTERVAL or PROCESSOR_MAX_RECORDS_PER_TXN input
// records, whichever comes first. The per-record path takes no locks,
// allocates nothing of its own and does not log.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// Options configure a Pipeline.
type Options struct {
	OutputTopic      string        // where records with an empty Topic go
	CommitInterval   time.Duration // a transaction ends after this long ...
	MaxRecordsPerTxn int           // ... or after this many input records
	// StallTimeout: the loop counts as stuck (Healthy fails) when one
	// iteration takes longer. Set it to the transaction timeout.
	StallTimeout     time.Duration
	ProgressInterval time.Duration // 0: no progress line
	// Lineage stamps the processor.source.* headers on every output.
	Lineage bool

	// OnError decides what happens to a record that fails for good
	// (default Fail); DLQTopic receives dead letters under DeadLetter.
	OnError  OnError
	DLQTopic string
	// MaxRetries bounds the retries of a record whose transform failed
	// with a retriable error or timed out.
	MaxRetries int
	// TransformTimeout is the per-attempt deadline of the chain; 0 is none.
	// Whatever it is, a record that runs, all its attempts together, for
	// half of TxnBudget (or its worst case by these deadlines, if longer)
	// is cut and fails under OnError: it alone holds up the transaction.
	TransformTimeout time.Duration
	// TxnBudget is how long a transaction may process before it must end
	// (the watchdog aborts and shrinks the batch past it). Default: four
	// fifths of StallTimeout, which is the transaction timeout.
	TxnBudget time.Duration
	Logger    *slog.Logger
	Metrics   *Metrics

	// InputTopics are the topics the session consumes. An output routed to
	// one of them, or to DLQTopic, fails its record: it would feed the
	// processor its own output.
	InputTopics []string
	// MaxTxnBytes bounds the output bytes (keys, values, headers) that one
	// transaction holds until it ends: the transaction ends at the first
	// poll boundary past it, and polls are sized from the bytes per input
	// record seen so far, so a transaction overshoots it only when its
	// records suddenly grow. 0 is no bound.
	MaxTxnBytes int64

	// EndOffsetsInterval is how often the assigned partitions' end offsets
	// are read for the lag gauges while no record arrives. Default 5s.
	EndOffsetsInterval time.Duration

	// RequireTopics must exist before the loop starts (the output and
	// dead-letter topics): producing to a missing topic would abort every
	// transaction forever. Run returns a *MissingTopicsError otherwise.
	RequireTopics []string

	// Chains are the chains of the workers beyond the first (which runs
	// the chain passed to New): with any, a poll's records run through the
	// chain concurrently, in runs of one partition's records shared among
	// the workers, while every partition's outputs are produced in its
	// input order, in the open transaction, under the same policies. A
	// transform then no longer sees one partition's records one after
	// another. Each chain must be built like the first and serve no one
	// else; the caller keeps them and closes them after Run has returned.
	Chains []*transform.Chain

	// FailingAfter is how long transactions may keep aborting with no
	// commit (at least minFailingAborts of them) before Healthy fails.
	// Default: twice StallTimeout, at least a minute.
	FailingAfter time.Duration

	// InjectAbort is for tests and fault drills only: it is called before
	// each commit with the transaction's sequence number (from 1), and
	// returning true aborts that transaction with reason "injected".
	InjectAbort func(seq uint64) bool
}

// budget returns TxnBudget, or its default: four fifths of StallTimeout
// (StallTimeout itself defaults to a minute).
func (o Options) budget() time.Duration {
	switch {
	case o.TxnBudget > 0:
		return o.TxnBudget
	case o.StallTimeout > 0:
		return o.StallTimeout * 4 / 5
	}
	return time.Minute * 4 / 5
}

// Pipeline runs the consume-transform-produce loop on one session.
type Pipeline struct {
	s     Session
	obs   Observer
	chain *transform.Chain
	o     Options
	log   *slog.Logger

	// Loop-goroutine state.
	workers []worker // workers[0] runs chain, on the loop's goroutine when a poll is not shared
	batches []batch  // the last poll's records, in runs of one partition's
	results []result // the workers' outcomes, one per record of batches

	// The workers' coordination within one poll (see startWorkers).
	next       atomic.Int64  // the next batch to take
	halt       atomic.Bool   // run no more records
	done       []atomic.Bool // per batch: its records have run
	ready      chan struct{} // a batch is done since the loop last looked
	wg         sync.WaitGroup
	lineage    *lineage  // nil when Options.Lineage is off
	cur        txnCounts // the open transaction's counts
	seq        uint64
	txnMax     int   // input records per transaction: the watchdog halves it, commits double it back
	perRecord  int64 // output bytes per input record in the last transaction, to size polls
	sized      bool  // perRecord has been measured
	inflight   []inflight
	poison     map[transform.Source]poison
	applied    []transform.Source   // poison entries this transaction applied
	missing    map[string]time.Time // destination topics the cluster confirmed missing, and when
	dlqLineage *lineage
	parts      *partitions        // also read by Status and the refresher
	partsEpoch uint64             // the session's assignment epoch parts reflects
	names      map[string]*string // input topic names, for the workers' slots

	// The monitor (watch.go): it cuts a record that has run for limit,
	// looking every tick while a transaction is open. blamed are the
	// records this transaction failed as the ones that held it up; an
	// abort makes them poison, so that their retry does not run them.
	mon    monitor
	limit  time.Duration
	tick   time.Duration
	blamed []blamed

	// work is the context records are processed and produced under: a
	// stop does not cancel it, so a shutdown never fails a record; it
	// ends TxnBudget after the stop, when the open transaction's budget
	// has run out anyway, so a produce blocked on a full buffer cannot hold
	// up the shutdown. txn is work bounded by the open transaction's
	// budget: every record's deadline.
	work      context.Context
	txn       context.Context
	txnCancel context.CancelFunc

	// Read by other goroutines.
	lastLoop    atomic.Int64 // unix nanos of the loop's last iteration
	running     atomic.Bool
	consumed    atomic.Uint64
	produced    atomic.Uint64
	commits     atomic.Uint64
	aborts      atomic.Uint64
	openRecords atomic.Int64 // input records of the open transaction, as of the last poll
	failure     atomic.Pointer[error]
	failedAt    atomic.Int64 // unix nanoseconds
	initialised atomic.Bool
	// failing is the run of transactions aborted since the last commit,
	// nil when the last one committed (see noteAbort).
	failing atomic.Pointer[abortRun]
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

// abortBackoff waits before the next transaction once several have
// aborted in a row: from 50ms, doubling to 2s, so that a cause that no
// abort clears (a broker refusing every write) is not retried in a tight
// loop. It returns early when ctx ends.
func (p *Pipeline) abortBackoff(ctx context.Context) {
	r := p.failing.Load()
	if r == nil || r.n < minFailingAborts {
		return
	}
	d := min(50*time.Millisecond<<min(r.n-minFailingAborts, 6), 2*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// noteAbort counts an aborted transaction into the run of aborts since
// the last commit. The caller leaves out aborts that found a record at
// fault; the watchdog's aborts make progress too (they shrink the
// transaction until it fits), and injected ones are a drill's, so they
// neither start nor extend a run.
func (p *Pipeline) noteAbort(reason txn.Reason) {
	if reason == txn.ReasonWatchdog || reason == txn.ReasonInjected {
		return
	}
	r := p.failing.Load()
	next := &abortRun{since: time.Now(), n: 1}
	if r != nil {
		next.since, next.n = r.since, r.n+1
	}
	p.failing.Store(next)
}

// txnCounts are the open transaction's counts, reset when it ends.
type txnCounts struct {
	records  int            // input records
	out      int            // outputs to the default topic
	routed   map[string]int // outputs to other topics
	filtered int
	dlq      int
	skipped  int
	bytes    int64 // output bytes (keys, values, headers)
	limited  int   // records failed for running past their limit
}

// reset zeroes the counts, keeping the routed map.
func (c *txnCounts) reset() {
	clear(c.routed)
	*c = txnCounts{routed: c.routed}
}

type topicPartition struct {
	topic     string
	partition int32
}

// New returns a pipeline that runs chain on session s, and reads status,
// health and lag through obs (a *txn.Session is both); Run starts it.
func New(s Session, obs Observer, chain *transform.Chain, o Options) (*Pipeline, error) {
	if o.OutputTopic == "" || o.CommitInterval <= 0 || o.MaxRecordsPerTxn <= 0 || o.Metrics == nil {
		return nil, errors.New("pipeline: OutputTopic, CommitInterval, MaxRecordsPerTxn and Metrics are required")
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = time.Minute
	}
	o.TxnBudget = o.budget()
	if o.FailingAfter <= 0 {
		o.FailingAfter = defaultFailingAfter(o.StallTimeout)
	}
	switch o.OnError {
	case "":
		o.OnError = Fail
	case Fail, Skip:
	case DeadLetter:
		if o.DLQTopic == "" {
			return nil, errors.New("pipeline: OnError DeadLetter needs a DLQTopic")
		}
	default:
		return nil, fmt.Errorf("pipeline: unknown OnError %q", o.OnError)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.EndOffsetsInterval <= 0 {
		o.EndOffsetsInterval = 5 * time.Second
	}
	if err := CheckBudget(o, chain); err != nil {
		return nil, err
	}
	p := &Pipeline{
		s: s, obs: obs, chain: chain, o: o, log: o.Logger,
		cur:        txnCounts{routed: make(map[string]int)},
		parts:      newPartitions(o.Metrics),
		txnMax:     o.MaxRecordsPerTxn,
		poison:     make(map[transform.Source]poison),
		missing:    make(map[string]time.Time),
		work:       context.Background(),
		txn:        context.Background(),
		txnCancel:  func() {},
		dlqLineage: newLineage(),
		names:      make(map[string]*string),
		limit:      recordLimit(o, chain),
	}
	p.tick = max(p.limit/8, minTick)
	p.workers = make([]worker, 1+len(o.Chains))
	p.workers[0].chain = chain
	for i, c := range o.Chains {
		p.workers[1+i].chain = c
	}
	for i := range p.workers {
		p.workers[i].renew(p.txn)
	}
	p.mon.seen = make([]sighting, len(p.workers))
	if o.Lineage {
		p.lineage = newLineage()
	}
	return p, nil
}

// RecordError is the fatal error of a record the chain failed on: the
// transaction holding it was aborted, nothing from it on was committed, and
// a restart meets the same record again.
type RecordError struct {
	Source transform.Source
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("record topic %s partition %d offset %d: %v", e.Source.Topic, e.Source.Partition, e.Source.Offset, e.Err)
}

// Unwrap returns the transform error.
func (e *RecordError) Unwrap() error { return e.Err }

// Run initialises the session, then loops until ctx ends or a fatal error.
// On ctx's end it stops polling, finishes the records already polled
// (within the open transaction's time budget), commits the open
// transaction and leaves the group, and returns nil. Ending ctx is never a
// record failure. The session is closed when Run returns.
func (p *Pipeline) Run(ctx context.Context) (err error) {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopWork := context.AfterFunc(ctx, func() { time.AfterFunc(p.o.TxnBudget, cancelWork) })
	defer stopWork()
	p.work = work
	defer func() {
		if err != nil {
			p.failedAt.Store(time.Now().UnixNano())
			p.failure.Store(&err)
		}
		p.running.Store(false)
		p.unwatch()
		p.s.Close()
	}()
	p.lastLoop.Store(time.Now().UnixNano())
	p.running.Store(true)
	if err := p.s.Init(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := p.checkTopics(ctx); err != nil {
		return err
	}
	p.initialised.Store(true)
	bg, stopBg := context.WithCancel(ctx)
	defer stopBg()
	go p.refreshEnds(bg, p.o.EndOffsetsInterval)
	if p.o.ProgressInterval > 0 {
		go p.progress(bg)
	}
	for ctx.Err() == nil {
		p.lastLoop.Store(time.Now().UnixNano())
		if err := p.step(ctx); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				break
			}
			return err
		}
	}
	return p.shutdown()
}

// MissingTopicsError names required topics that do not exist: at start
// (Run checks Options.RequireTopics before the loop), or, with Deleted,
// found missing while running (the topic was deleted), which no retry
// can fix: every transaction would abort.
type MissingTopicsError struct {
	Topics  []string
	Deleted bool
}

func (e *MissingTopicsError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("topics %v do not exist any more; create them again", e.Topics)
	}
	return fmt.Sprintf("topics %v do not exist; create them before starting the processor", e.Topics)
}

// checkTopics fails on missing required topics. A cluster that cannot
// answer is not a reason to stop: the loop finds out soon enough.
func (p *Pipeline) checkTopics(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	missing, err := p.s.MissingTopics(cctx, p.o.RequireTopics)
	if err != nil {
		p.log.Warn("could not check that the output topics exist", "err", err.Error())
		return nil
	}
	if len(missing) > 0 {
		return &MissingTopicsError{Topics: missing}
	}
	return nil
}

// step polls once, processes what arrived and ends the transaction when it
// is due.
func (p *Pipeline) step(ctx context.Context) error {
	deadline := time.Now().Add(time.Second) // idle: wake up to stay healthy
	if p.s.InTxn() {
		deadline = p.due()
	}
	pctx, cancel := context.WithDeadline(ctx, deadline)
	fs := p.s.Poll(pctx, p.pollSize())
	cancel()
	p.observe(fs)

	if fs.NumRecords() > 0 {
		if !p.s.InTxn() {
			if err := p.s.Begin(ctx); err != nil {
				if errors.Is(err, txn.ErrRebuilt) {
					return nil // the new client fetches these records again
				}
				return err
			}
			p.txn, p.txnCancel = context.WithDeadline(p.work, p.budgetEnd())
			p.watch()
		}
		err := p.process(fs)
		p.openRecords.Store(int64(p.cur.records))
		switch {
		case errors.Is(err, errWatchdog):
			done := p.cur.records
			if p.cur.limited > 0 {
				// The record that held it up is known: its retry fails it,
				// and the others fit as they did.
				p.log.Warn("processing used up the transaction's time budget, held up by a record that ran past its limit; "+
					"aborting it once: its retry applies PROCESSOR_ON_ERROR to that record",
					"budget", p.o.TxnBudget.String(), "records_done", done, "records_blamed", p.cur.limited)
			} else {
				p.txnMax = max(1, done/2)
				p.log.Warn("processing used up the transaction's time budget; aborting it and retrying with smaller transactions",
					"budget", p.o.TxnBudget.String(), "records_done", done, "next_max_records", p.txnMax)
			}
			_, err := p.end(ctx, txn.ReasonWatchdog)
			return err
		case err != nil:
			if _, endErr := p.end(ctx, txn.ReasonTransform); endErr != nil {
				p.log.Error("aborting the transaction failed", "err", endErr.Error())
			}
			return err
		}
	}
	if p.s.InTxn() && (p.cur.records >= p.txnMax || (p.o.MaxTxnBytes > 0 && p.cur.bytes >= p.o.MaxTxnBytes) ||
		!time.Now().Before(p.due())) {
		if _, err := p.end(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

// due is when the open transaction ends: after the commit interval, or at
// the end of its time budget if that comes first (a commit interval close
// to the transaction timeout must not let an idle transaction run into
// the watchdog).
func (p *Pipeline) due() time.Time {
	return p.s.Begun().Add(min(p.o.CommitInterval, p.o.TxnBudget))
}

// pollSize is how many records the next poll may return: what is left of
// the transaction's record count and of its byte bound, at the bytes per
// record seen so far (one record, to learn them, before any was seen).
func (p *Pipeline) pollSize() int {
	n := p.txnMax - p.cur.records
	if p.o.MaxTxnBytes > 0 {
		per := p.perRecord
		if p.cur.records > 0 {
			per = max(per, p.cur.bytes/int64(p.cur.records))
		}
		switch {
		case per > 0:
			n = min(n, int(max(1, (p.o.MaxTxnBytes-p.cur.bytes)/per)))
		case !p.sized && p.cur.records == 0:
			n = 1
		}
	}
	return max(1, n)
}

// process runs every polled record through the chain and produces the
// outputs, partition by partition, each partition's in its input order.
// With more than one worker the chains run concurrently (see split and
// startWorkers) while the outputs are produced here, in the same order
// and under the same policies as with one worker. This is the per-record
// path: nothing here allocates, locks or logs unless a record fails.
func (p *Pipeline) process(fs kgo.Fetches) error {
	parallel := p.split(fs)
	if parallel {
		p.startWorkers()
		defer p.stopWorkers()
	}
	for bi, b := range p.batches {
		if parallel {
			p.waitBatch(bi)
		} else {
			p.workers[0].slot.publish(b.topic, b.partition)
		}
		for j, r := range b.recs {
			var res result
			if parallel {
				res = p.results[b.at+j]
				if res.notRun {
					p.stopWorkers()
					p.blameRest(b.at + j)
					return errWatchdog
				}
			} else {
				select {
				case <-p.txn.Done():
					return errWatchdog
				default:
				}
			}
			if r.Attrs.IsControl() {
				continue // a transaction marker: kept so that committed offsets step over it
			}
			src := transform.Source{Topic: *b.topic, Partition: b.partition, Offset: r.Offset}
			if !parallel {
				r.Topic = "" // a worker did it already: the chain may have routed r since
			}
			p.cur.records++
			if len(p.poison) > 0 {
				// It failed for good in an earlier, aborted attempt.
				if pz, ok := p.poison[src]; ok {
					p.applied = append(p.applied, src)
					drop := ""
					if pz.dlqFailed {
						drop = "the dead letter with its value could not be written either"
					}
					if err := p.failed(src, r, pz.stage, pz.attempts, pz.err, drop); err != nil {
						return err
					}
					continue
				}
			}
			if !parallel {
				w := &p.workers[0]
				res.out, res.stage, res.attempts, res.err = p.run(w, src, r, w.out[:0])
				w.out = res.out[:0]
			} else if errors.Is(res.err, errWatchdog) {
				p.stopWorkers() // before produceOutputs changes p.poison, which they read
			}
			err := p.produceOutputs(src, r, res)
			if !parallel {
				clear(res.out) // stopWorkers clears the workers' outputs
			}
			if err != nil {
				if parallel {
					p.stopWorkers()
					p.blameRest(b.at + j + 1)
				}
				return err
			}
		}
	}
	return nil
}

// produceOutputs applies the outcome of r's chain run: the watchdog, the
// error policy, or producing the outputs. It writes nothing into res.out,
// which may be a worker's buffer.
func (p *Pipeline) produceOutputs(src transform.Source, r *kgo.Record, res result) error {
	if errors.Is(res.err, errWatchdog) {
		if p.blameSlow(src, res) {
			return res.err
		}
		if p.cur.records == 1 {
			// Alone in its transaction and still over the budget: no
			// smaller transaction can help. Its next attempt fails it.
			p.poison[src] = poison{failure: failure{stage: res.stage, attempts: res.attempts,
				err: fmt.Errorf("the record did not finish within the transaction's time budget (%s) even alone in its transaction", p.o.TxnBudget)}}
		}
		return res.err
	}
	if res.err != nil {
		if le, ok := res.err.(*limitError); ok {
			p.cur.limited++
			p.blamed = append(p.blamed, blamed{src: src, failure: failure{stage: res.stage, attempts: res.attempts, err: le}})
		}
		return p.failed(src, r, res.stage, res.attempts, res.err, "")
	}
	if len(res.out) == 0 {
		p.cur.filtered++
		return nil
	}
	for _, o := range res.out {
		if o.Topic == "" {
			o.Topic = p.o.OutputTopic
			p.cur.out++
		} else {
			p.cur.routed[o.Topic]++
		}
		if p.lineage != nil {
			p.lineage.stamp(o, src)
		}
		if p.o.MaxTxnBytes > 0 {
			p.cur.bytes += transform.Bytes(o)
		}
		p.inflight = append(p.inflight, inflight{r: o, src: src})
		p.s.Produce(p.work, o, src)
	}
	return nil
}

// blamed is a record this transaction failed as the one that held it up.
type blamed struct {
	src transform.Source
	failure
}

// blameSlow blames src, interrupted by the end of the budget, when the
// monitor saw it run for at least half the budget: it held up the
// transaction, and the records queued behind it did not. Its retry then
// fails it under the policy instead of the transaction shrinking.
func (p *Pipeline) blameSlow(src transform.Source, res result) bool {
	ran := p.ranFor(src)
	if ran < p.o.TxnBudget/2 {
		return false
	}
	p.cur.limited++
	p.blamed = append(p.blamed, blamed{src: src, failure: failure{stage: res.stage, attempts: max(1, res.attempts),
		err: &limitError{ran: ran, budget: p.o.TxnBudget}}})
	p.log.Warn("a record ran for most of the transaction's time budget; it fails under PROCESSOR_ON_ERROR on its retry",
		"topic", src.Topic, "partition", src.Partition, "offset", src.Offset, "ran", ran.Round(time.Millisecond).String(), "policy", string(p.o.OnError))
	return true
}

// blameRest looks, once the workers have stopped and the transaction is
// to abort, at the results from p.results[from] on that the loop did not
// reach: records the monitor cut, or that ran for most of the budget when
// it ran out, are blamed too, so that their retry does not run them again.
func (p *Pipeline) blameRest(from int) {
	for _, b := range p.batches {
		for j, r := range b.recs {
			i := b.at + j
			if i < from {
				continue
			}
			res := p.results[i]
			src := transform.Source{Topic: *b.topic, Partition: b.partition, Offset: r.Offset}
			switch le, ok := res.err.(*limitError); {
			case ok:
				p.cur.limited++
				p.blamed = append(p.blamed, blamed{src: src, failure: failure{stage: res.stage, attempts: res.attempts, err: le}})
			case errors.Is(res.err, errWatchdog):
				p.blameSlow(src, res)
			}
		}
	}
}

// end ends the open transaction, committing unless abort is set (or a
// produce failed), and accounts for it.
func (p *Pipeline) end(ctx context.Context, abort txn.Reason) (bool, error) {
	p.seq++
	if abort == "" && p.o.InjectAbort != nil && p.o.InjectAbort(p.seq) {
		abort = txn.ReasonInjected
	}
	committed, err := p.s.End(ctx, p.cur.records, abort)
	failures := p.s.TakeFailures()
	p.txnCancel()
	p.unwatch()
	if p.cur.records > 0 {
		p.perRecord, p.sized = p.cur.bytes/int64(p.cur.records), true
	}
	if committed {
		m := p.o.Metrics
		m.Consumed.Add(float64(p.cur.records))
		m.Filtered.Add(float64(p.cur.filtered))
		m.DLQ.Add(float64(p.cur.dlq))
		m.Skipped.Add(float64(p.cur.skipped))
		for _, src := range p.applied {
			delete(p.poison, src) // handled; a rebalance may hand leftovers to another instance, which finds them itself
		}
		p.txnMax = min(p.o.MaxRecordsPerTxn, p.txnMax*2)
		out := p.cur.out
		if p.cur.out > 0 {
			m.Produced.WithLabelValues(p.o.OutputTopic).Add(float64(p.cur.out))
		}
		for t, n := range p.cur.routed {
			m.Produced.WithLabelValues(t).Add(float64(n))
			out += n
		}
		p.consumed.Add(uint64(p.cur.records))
		p.produced.Add(uint64(out))
		p.commits.Add(1)
		p.parts.committed(p.obs.CommittedOffsets())
		p.failing.Store(nil)
	} else {
		p.aborts.Add(1)
		found, before, txnMax := len(p.blamed) > 0, len(p.poison), p.txnMax
		for _, b := range p.blamed {
			p.poison[b.src] = poison{failure: b.failure}
		}
		if perr := p.notePoison(ctx, failures); perr != nil && err == nil {
			err = perr
		}
		// An abort that found a record at fault (or shrank the next
		// transaction to find one) made progress: its retry goes without it.
		if !found && len(p.poison) <= before && p.txnMax >= txnMax {
			p.noteAbort(abort)
			defer p.abortBackoff(ctx)
		}
	}
	clear(p.blamed)
	p.blamed = p.blamed[:0]
	clear(p.inflight) // drop the record pointers
	p.inflight = p.inflight[:0]
	p.applied = p.applied[:0]
	p.cur.reset()
	p.openRecords.Store(0)
	if !p.s.InTxn() { // every record of the ended transaction is done
		if p.lineage != nil {
			p.lineage.reset()
		}
		p.dlqLineage.reset()
	}
	return committed, err
}

// shutdown commits the open transaction with a fresh deadline.
func (p *Pipeline) shutdown() error {
	if !p.s.InTxn() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.o.StallTimeout)
	defer cancel()
	committed, err := p.end(ctx, "")
	if err != nil {
		return fmt.Errorf("committing the last transaction at shutdown: %w", err)
	}
	p.log.Info("shutting down: last transaction ended", "committed", committed)
	return nil
}

// observe tracks the partitions once per poll: the assignment when it
// changed (with the offsets the group committed for it), and the
// positions and end offsets the poll brought.
func (p *Pipeline) observe(fs kgo.Fetches) {
	if e := p.s.AssignmentEpoch(); e != p.partsEpoch {
		p.partsEpoch = e
		p.parts.assign(p.obs.Assigned())
		p.parts.committed(p.obs.CommittedOffsets())
	}
	p.parts.fetched(fs)
}

// progress logs one line every ProgressInterval.
func (p *Pipeline) progress(ctx context.Context) {
	t := time.NewTicker(p.o.ProgressInterval)
	defer t.Stop()
	last := time.Now()
	var lastIn, lastOut, lastCommits, lastAborts uint64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			secs := now.Sub(last).Seconds()
			in, out, c, a := p.consumed.Load(), p.produced.Load(), p.commits.Load(), p.aborts.Load()
			p.log.Info("progress",
				"in_per_sec", int64(float64(in-lastIn)/secs),
				"out_per_sec", int64(float64(out-lastOut)/secs),
				"committed", c-lastCommits,
				"aborted", a-lastAborts,
				"lag", p.lag(),
				"ready", p.Ready(),
			)
			last, lastIn, lastOut, lastCommits, lastAborts = now, in, out, c, a
		}
	}
}

// Stats is a snapshot of the pipeline's counters since start.
type Stats struct {
	Consumed, Produced, Commits, Aborts uint64
	Lag                                 int64 // of the assigned partitions: last stable offset minus committed offset, summed
}

// Stats returns the counters since start; safe from any goroutine.
func (p *Pipeline) Stats() Stats {
	return Stats{p.consumed.Load(), p.produced.Load(), p.commits.Load(), p.aborts.Load(), p.lag()}
}

// lag is the assigned partitions' lag, summed.
func (p *Pipeline) lag() int64 {
	_, total := p.parts.snapshot()
	return total
}

// Healthy returns nil while the loop is alive and not stuck: it is waiting
// for Kafka, or its last iteration started within StallTimeout, and (into
// PostgreSQL) commits are not failing for a reason retrying does not fix,
// nor for a transient one for longer than StallTimeout. After a fatal
// error it returns that error.
func (p *Pipeline) Healthy() error {
	if f := p.failure.Load(); f != nil {
		return *f
	}
	if !p.initialised.Load() || p.obs.Connecting() {
		return nil
	}
	if since := time.Since(time.Unix(0, p.lastLoop.Load())); since > p.o.StallTimeout {
		return fmt.Errorf("the processing loop has not advanced for %s", since.Round(time.Second))
	}
	if r := p.failing.Load(); r != nil && r.n >= minFailingAborts && time.Since(r.since) > p.o.FailingAfter {
		why := ""
		if _, last := p.obs.Metrics().Aborts(); last != nil {
			why = ", the last one " + string(last.Reason)
			if last.Detail != "" {
				why += ": " + clip(last.Detail)
			}
		}
		return fmt.Errorf("no transaction has committed for %s: %d aborted in a row%s", time.Since(r.since).Round(time.Second), r.n, why)
	}
	// Into PostgreSQL: a failure retrying is not expected to fix is
	// unhealthy at once, a transient one once it has lasted StallTimeout.
	if since, transient, why := p.obs.CommitFailing(); !since.IsZero() && (!transient || time.Since(since) > p.o.StallTimeout) {
		return fmt.Errorf("committing to PostgreSQL has failed for %s: %s", time.Since(since).Round(time.Second), clip(why))
	}
	return nil
}

// Ready reports whether the pipeline runs, has joined its group and has
// initialised its transactional producer.
func (p *Pipeline) Ready() bool { return p.running.Load() && p.obs.Ready() }
