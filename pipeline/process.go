package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// process runs every polled record through the chain and produces the
// outputs, partition by partition, each partition's in its input order.
// With more than one worker the chains run concurrently (see pool.split
// and startWorkers) while the outputs are produced here, in the same order
// and under the same policies as with one worker. This is the per-record
// path: nothing here allocates, locks or logs unless a record fails.
func (p *Pipeline) process(fs kgo.Fetches) error {
	defer p.pool.release() // runs last: after the workers have stopped
	parallel := p.pool.split(fs)
	if parallel {
		p.startWorkers()
		defer p.pool.stop()
	}
	byRecord := parallel && p.pool.order == orderKey
	pass := !parallel && p.passes()
	chain := p.pool.workers[p.pool.solo].chain
	done := p.open.ctx.Done() // once per poll, not per record
	for bi, b := range p.pool.batches {
		switch {
		case byRecord: // waitRecord
		case parallel:
			p.pool.wait(bi)
		default:
			p.pool.workers[p.pool.solo].slot.publish(b.topic, b.partition)
		}
		for j, r := range b.recs {
			if parallel {
				if byRecord {
					p.pool.waitRecord(b.at + j)
				}
				if p.pool.results[b.at+j].notRun {
					p.pool.stop()
					p.blameRest(b.at + j)
					return errWatchdog
				}
			} else {
				select {
				case <-done:
					return errWatchdog
				default:
				}
			}
			if r.Attrs.IsControl() {
				continue // a transaction marker: kept so that committed offsets step over it
			}
			src := record.Source{Topic: *b.topic, Partition: b.partition, Offset: r.Offset}
			if !parallel {
				r.Topic = "" // a worker did it already: the chain may have routed r since
			}
			p.open.counts.records++
			p.open.stamps = append(p.open.stamps, r.Timestamp.UnixMilli()) // latency.go
			if len(p.book.poison) > 0 {
				if applied, err := p.applyPoison(src, r); applied || err != nil {
					if err != nil {
						return err
					}
					continue
				}
			}
			if pass && chain.Fits(r) {
				// What running the chain would return: r, its one output.
				p.produceOutput(r, src, src)
				continue
			}
			var res result
			if !parallel {
				p.runSolo(src, r, b.at+j, &res)
			} else if res = p.pool.results[b.at+j]; errors.Is(res.err, errWatchdog) {
				p.pool.stop() // before produceOutputs changes p.book.poison, which they read
			}
			err := p.produceOutputs(src, r, &res)
			if !parallel {
				clear(res.out) // pool.stop clears the workers' outputs
			}
			if err != nil {
				if parallel {
					p.pool.stop()
					p.blameRest(b.at + j + 1)
				}
				return err
			}
		}
	}
	return nil
}

// passes reports whether the loop may produce a poll's records itself,
// each its own only output, without running the chain: the chain passes
// its input through unchanged (transform.PassThrough), and nothing that
// can fail, block or be cut runs around it: no state, no hop, no replay,
// no injected crash. A record over MaxOutputBytes, the one failure, takes
// the full path (runSolo), which applies the policy to it.
func (p *Pipeline) passes() bool {
	w := &p.pool.workers[p.pool.solo]
	return p.pool.passThrough && w.stores == nil && w.after == nil && !p.o.Replay && p.o.InjectCrash == nil
}

// applyPoison fails src under the policy if it failed for good in an
// earlier, aborted attempt, and reports whether it did.
func (p *Pipeline) applyPoison(src record.Source, r *kgo.Record) (bool, error) {
	pz, ok := p.book.poison[src]
	if !ok {
		return false, nil
	}
	p.open.applied = append(p.open.applied, src)
	drop := ""
	if pz.dlqFailed {
		drop = "the dead letter with its value could not be written either"
	}
	return true, p.failed(src, r, pz.stage, pz.attempts, pz.err, drop)
}

// runSolo runs r, record i of the poll, on the one worker, in the loop's
// goroutine, into res (zero; in place: a result is too large to copy per
// record for nothing).
func (p *Pipeline) runSolo(src record.Source, r *kgo.Record, i int, res *result) {
	w := &p.pool.workers[p.pool.solo]
	if w.stores != nil {
		w.stores.stream = p.streamAt(i)
	}
	switch {
	case p.fromHop(src.Topic):
		res.origin = p.origin(src, r)
	case p.o.Replay:
		res.origin = replayOrigin(src, r)
	}
	res.out, res.stage, res.attempts, res.err = p.run(w, src, r, w.out[:0])
	w.out = res.out[:0]
	if w.stores != nil {
		res.stateBytes = w.stores.bytes
		res.late = w.stores.takeLates(res.err)
	}
}

// produceOutputs applies the outcome of r's chain run: the watchdog, the
// error policy, or producing the outputs. It writes nothing into res.out,
// which may be a worker's buffer (res is read only).
func (p *Pipeline) produceOutputs(src record.Source, r *kgo.Record, res *result) error {
	if errors.Is(res.err, errWatchdog) {
		if p.blameSlow(src, *res) {
			return res.err
		}
		if p.open.counts.records == 1 {
			// Alone in its transaction and still over the budget, though it
			// did not run for half of it: no smaller transaction can help,
			// but a stall of the whole process (SIGSTOP, a long pause) does
			// this too, and is no record's fault. Found so twice in a row,
			// with no commit between, its next attempt fails it.
			if p.book.aloneSet && p.book.alone == src {
				p.book.poison[src] = poison{failure: failure{stage: res.stage, attempts: res.attempts,
					err: fmt.Errorf("the record did not finish within the transaction's time budget (%s) even alone in its transaction", p.o.TxnBudget)}}
			}
			p.book.alone, p.book.aloneSet = src, true
		}
		return res.err
	}
	if res.err != nil && isDependency(res.err) {
		return &dependencyError{stage: res.stage, err: res.err}
	}
	if res.err != nil {
		if le, ok := res.err.(*limitError); ok {
			p.open.counts.limited++
			p.open.blamed = append(p.open.blamed, blamed{src: src, failure: failure{stage: res.stage, attempts: res.attempts, err: le}})
		}
		return p.failed(src, r, res.stage, res.attempts, res.err, "")
	}
	if p.o.MaxTxnBytes > 0 {
		p.open.counts.bytes += res.stateBytes // the changelog records it adds
	}
	p.open.counts.countLate(res.late)
	if len(res.out) == 0 {
		p.open.counts.filtered++
		return nil
	}
	for _, o := range res.out {
		lin := src
		if res.origin.Topic != "" {
			lin = res.origin
		}
		p.produceOutput(o, src, lin)
	}
	return nil
}

// produceOutput produces o, an output of src, into the open transaction:
// to the output topic unless routed, with the lineage lin (src, or the
// input a repartitioned record came from) unless it goes to a hop.
func (p *Pipeline) produceOutput(o *kgo.Record, src, lin record.Source) {
	if o.Topic == "" {
		o.Topic = p.o.OutputTopic
		p.open.counts.out++
	} else {
		p.open.counts.routed[o.Topic]++
	}
	if p.open.lineage != nil && !p.fromHop(o.Topic) {
		p.open.lineage.stamp(o, lin)
	}
	if p.o.MaxTxnBytes > 0 {
		p.open.counts.bytes += transform.Bytes(o)
	}
	p.open.sent.note(o, src)
	p.s.Produce(p.work, o, src)
}

// blamed is a record this transaction failed as the one that held it up.
type blamed struct {
	src record.Source
	failure
}

// blameSlow blames src, interrupted by the end of the budget, when the
// monitor saw it run for at least half the budget: it held up the
// transaction, and the records queued behind it did not. Its retry then
// fails it under the policy instead of the transaction shrinking.
func (p *Pipeline) blameSlow(src record.Source, res result) bool {
	ran := p.ranFor(src)
	if ran < p.o.TxnBudget/2 {
		return false
	}
	p.open.counts.limited++
	p.open.blamed = append(p.open.blamed, blamed{src: src, failure: failure{stage: res.stage, attempts: max(1, res.attempts),
		err: &limitError{ran: ran, budget: p.o.TxnBudget, names: p.names}}})
	p.log.Warn("a record ran for most of the transaction's time budget; it fails under "+p.names.onError+" on its retry",
		"topic", src.Topic, "partition", src.Partition, "offset", src.Offset, "ran", ran.Round(time.Millisecond).String(), "policy", string(p.o.OnError))
	return true
}

// blameRest looks, once the workers have stopped and the transaction is
// to abort, at the results from p.pool.results[from] on that the loop did not
// reach: records the monitor cut, or that ran for most of the budget when
// it ran out, are blamed too, so that their retry does not run them again.
func (p *Pipeline) blameRest(from int) {
	for _, b := range p.pool.batches {
		for j, r := range b.recs {
			i := b.at + j
			if i < from {
				continue
			}
			res := p.pool.results[i]
			src := record.Source{Topic: *b.topic, Partition: b.partition, Offset: r.Offset}
			switch le, ok := res.err.(*limitError); {
			case ok:
				p.open.counts.limited++
				p.open.blamed = append(p.open.blamed, blamed{src: src, failure: failure{stage: res.stage, attempts: res.attempts, err: le}})
			case errors.Is(res.err, errWatchdog):
				p.blameSlow(src, res)
			}
		}
	}
}
