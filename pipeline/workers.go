package pipeline

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// batch is a run of one partition's records of a poll, in offset order.
type batch struct {
	topic     *string // interned (Pipeline.topicNames): the worker publishes it in its slot
	partition int32
	recs      []*kgo.Record
	at        int // index of recs[0] in Pipeline.results
}

// result is what a chain made of one input record: its outputs; or stage,
// attempts and err say why it failed (as runChain returns them).
type result struct {
	out      []*kgo.Record // part of the worker's buffer, which the loop only reads
	stage    string
	attempts int
	err      error
	// notRun: the worker did not run the record because the transaction's
	// budget had run out (the loop then aborts the transaction).
	notRun bool
}

// worker runs records through its own chain: a Chain, and the transforms
// in it, serve one goroutine at a time.
type worker struct {
	chain *transform.Chain
	out   []*kgo.Record // the outputs of the records it ran in this poll
	// ctx is the open transaction's context, which the monitor cuts when
	// the worker's record has run for its limit (renewed after a cut).
	ctx  context.Context
	slot slot // what it is running, for the monitor
}

// minChunk is the fewest records a worker takes at a time (unless a
// partition has fewer in the poll): a chunk costs one atomic addition.
const minChunk = 16

// split cuts the poll's records into p.batches, each a run of one
// partition's records in offset order, and says whether the workers should
// run them: more than one worker, and more than one batch to share among
// them. With workers, a partition's records are cut into chunks of about a
// quarter of each worker's share, because a poll over a backlog often
// holds thousands of records of one partition and a few of another.
func (p *Pipeline) split(fs kgo.Fetches) bool {
	clear(p.batches) // drop the last poll's record pointers
	p.batches = p.batches[:0]
	chunk := int(^uint(0) >> 1)
	if len(p.workers) > 1 {
		chunk = max(minChunk, fs.NumRecords()/(4*len(p.workers)))
	}
	n := 0
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			name := p.topicNames[t.Topic]
			if name == nil {
				topic := t.Topic // a copy: a pointer into fs would keep its records
				name = &topic
				p.topicNames[topic] = name
			}
			for k := range t.Partitions {
				part := &t.Partitions[k]
				for recs := part.Records; len(recs) > 0; {
					c := min(chunk, len(recs))
					p.batches = append(p.batches, batch{topic: name, partition: part.Partition, recs: recs[:c], at: n})
					n += c
					recs = recs[c:]
				}
			}
		}
	}
	if len(p.workers) < 2 || len(p.batches) < 2 {
		return false
	}
	if cap(p.results) < n {
		p.results = make([]result, n)
	}
	p.results = p.results[:n]
	return true
}

// startWorkers starts the workers on p.batches: each takes the next batch
// not yet taken and runs its records through its chain, marking the batch
// done; the loop goroutine meanwhile produces the finished batches' outputs
// in order (waitBatch). stopWorkers must follow.
//
// The workers read the pipeline's state (options, poison and missing
// topics) but change none of it; what the records' outcomes change, the
// loop applies, record by record in partition order, and it changes
// nothing the workers read while they run.
func (p *Pipeline) startWorkers() {
	p.next.Store(0)
	p.halt.Store(false)
	if cap(p.done) < len(p.batches) {
		p.done = make([]atomic.Bool, len(p.batches))
	}
	p.done = p.done[:len(p.batches)]
	for i := range p.done {
		p.done[i].Store(false)
	}
	if p.ready == nil {
		p.ready = make(chan struct{}, 1)
	}
	n := min(len(p.workers), len(p.batches))
	p.wg.Add(n)
	for i := range n {
		go p.runWorker(i)
	}
}

// runWorker is worker i's share of the batches.
func (p *Pipeline) runWorker(i int) {
	defer p.wg.Done()
	w := &p.workers[i]
	for {
		bi := int(p.next.Add(1)) - 1
		if bi >= len(p.batches) {
			return
		}
		b := &p.batches[bi]
		w.slot.publish(b.topic, b.partition)
		halted := p.halt.Load()
		for j, r := range b.recs {
			res := &p.results[b.at+j]
			*res = result{}
			if halted {
				res.notRun = true
				continue
			}
			select {
			case <-p.txn.Done():
				res.notRun = true
				continue
			default:
			}
			if r.Attrs.IsControl() {
				continue
			}
			src := transform.Source{Topic: *b.topic, Partition: b.partition, Offset: r.Offset}
			r.Topic = ""
			if len(p.poison) > 0 {
				if _, ok := p.poison[src]; ok {
					continue // the loop applies the policy
				}
			}
			from := len(w.out)
			w.out, res.stage, res.attempts, res.err = p.run(w, src, r, w.out)
			res.out = w.out[from:len(w.out):len(w.out)]
		}
		p.done[bi].Store(true)
		select {
		case p.ready <- struct{}{}:
		default: // a signal is pending already
		}
	}
}

// waitBatch returns once batch bi is done.
func (p *Pipeline) waitBatch(bi int) {
	for !p.done[bi].Load() {
		<-p.ready
	}
}

// stopWorkers tells the workers to run no more records (the loop returned
// early: the transaction aborts), waits for them, and drops the record
// pointers their outputs hold.
func (p *Pipeline) stopWorkers() {
	p.halt.Store(true)
	p.wg.Wait()
	select {
	case <-p.ready:
	default:
	}
	p.clearWorkers()
}

// clearWorkers drops the record pointers the workers' outputs hold, once
// the loop has produced them.
func (p *Pipeline) clearWorkers() {
	for i := range p.workers {
		clear(p.workers[i].out)
		p.workers[i].out = p.workers[i].out[:0]
	}
}
