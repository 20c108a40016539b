package txn

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// What the committers that produce to Kafka share: the failures of a
// batch's outputs (outcomes, which the stored committer feeds too), and
// the flush that turns a failed output into an abort (producer).

// Failure is an output record that could not be produced, and why.
type Failure struct {
	Record *kgo.Record
	Err    error
}

// maxFailures bounds the failures kept per transaction.
const maxFailures = 1000

// outcomes are the failed outputs of the open batch: the first error, and
// up to maxFailures records, taken by TakeFailures.
type outcomes struct {
	produceErr atomic.Pointer[error] // first failed produce of the open transaction
	mu         sync.Mutex
	failures   []Failure
}

// failed notes that r could not be produced; it is the produce promise,
// called for every output. It allocates only for a failure: the error the
// first failure keeps is a copy taken in fail, so that err itself does not
// escape to the heap on every call.
func (o *outcomes) failed(r *kgo.Record, err error) {
	if err != nil {
		o.fail(r, err)
	}
}

// fail notes r's failure with err.
func (o *outcomes) fail(r *kgo.Record, err error) {
	first := err
	o.produceErr.CompareAndSwap(nil, &first)
	o.mu.Lock()
	if len(o.failures) < maxFailures {
		o.failures = append(o.failures, Failure{Record: r, Err: err})
	}
	o.mu.Unlock()
}

// first is the first produce error of the open batch, or nil.
func (o *outcomes) first() error {
	if p := o.produceErr.Load(); p != nil {
		return *p
	}
	return nil
}

// take returns the failed records and forgets them.
func (o *outcomes) take() []Failure {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.failures
	o.failures = nil
	return f
}

// producer is the part of a committer that produces to Kafka.
type producer struct {
	cl      *kgo.Client
	out     *outcomes
	promise func(*kgo.Record, error) // out.failed, made once rather than per record
	lim     *limiter
	log     *slog.Logger
	timeout time.Duration // the transaction timeout
}

// hello asks for a producer ID, which reaches the brokers and
// authenticates.
func (p *producer) hello(ctx context.Context) error {
	_, _, err := p.cl.ProducerID(ctx)
	return err
}

// prepare reads the producer's batch limits.
func (p *producer) prepare(ctx context.Context) error { return p.lim.read(ctx) }

func (p *producer) produce(ctx context.Context, r *kgo.Record) { p.cl.Produce(ctx, r, p.promise) }

// flushed waits until every output of the batch is acknowledged or has
// failed; one that failed turns a commit into an abort, for which it
// returns the reason and why.
func (p *producer) flushed(ctx context.Context, abort Reason, begun time.Time) (Reason, string) {
	if err := p.cl.Flush(ctx); err != nil {
		return abort, ""
	}
	perr := p.out.first()
	if perr == nil || abort != "" {
		return abort, ""
	}
	abort = ReasonProduce
	if time.Since(begun) >= p.timeout {
		// The broker aborted it at the timeout; Kafka 4 (KIP-890) then
		// fails its produces this way.
		abort = ReasonTimeout
	}
	p.log.Warn("an output record could not be produced; aborting the transaction", "reason", string(abort), "err", perr.Error())
	return abort, "an output record could not be produced: " + perr.Error()
}

// committed is the group client's committed offsets.
func (p *producer) committed() map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	for t, ps := range p.cl.CommittedOffsets() {
		m := make(map[int32]int64, len(ps))
		for part, eo := range ps {
			m[part] = eo.Offset
		}
		out[t] = m
	}
	return out
}

func (p *producer) maxRecordBytes(topic string) int { return int(p.lim.batchLimit(topic)) }

// forget: the group client keeps no per-partition state of the
// committer's.
func (p *producer) forget(map[string][]int32) {}

// commitFailing: committing to Kafka is never reported so.
func (p *producer) commitFailing() (time.Time, bool, string) { return time.Time{}, false, "" }
