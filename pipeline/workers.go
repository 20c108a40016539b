package pipeline

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// pool is the workers and the poll they share: the last poll's records in
// batches, the outcome of each record, and the workers' coordination
// within one poll (see startWorkers).
type pool struct {
	workers []worker // workers[0] runs chain, on the loop's goroutine when a poll is not shared
	batches []batch  // the last poll's records, in runs of one partition's
	results []result // the workers' outcomes, one per record of batches

	next  atomic.Int64  // the next batch to take
	halt  atomic.Bool   // run no more records
	done  []atomic.Bool // per batch: its records have run
	ready chan struct{} // a batch is done since the loop last looked
	wg    sync.WaitGroup

	topicNames map[string]*string // input topic names, for the workers' slots
}

// newPool returns the pool of one worker per chain: chain, then chains.
func newPool(chain *transform.Chain, chains []*transform.Chain) pool {
	ws := make([]worker, 1+len(chains))
	ws[0].chain = chain
	for i, c := range chains {
		ws[1+i].chain = c
	}
	return pool{workers: ws, topicNames: make(map[string]*string)}
}

// batch is a run of one partition's records of a poll, in offset order.
type batch struct {
	topic     *string // interned (pool.topicNames): the worker publishes it in its slot
	partition int32
	recs      []*kgo.Record
	at        int // index of recs[0] in pool.results
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

// split cuts the poll's records into batches, each a run of one
// partition's records in offset order, and says whether the workers should
// run them: more than one worker, and more than one batch to share among
// them. With workers, a partition's records are cut into chunks of about a
// quarter of each worker's share, because a poll over a backlog often
// holds thousands of records of one partition and a few of another.
func (pl *pool) split(fs kgo.Fetches) bool {
	clear(pl.batches) // drop the last poll's record pointers
	pl.batches = pl.batches[:0]
	chunk := int(^uint(0) >> 1)
	if len(pl.workers) > 1 {
		chunk = max(minChunk, fs.NumRecords()/(4*len(pl.workers)))
	}
	n := 0
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			name := pl.topicNames[t.Topic]
			if name == nil {
				topic := t.Topic // a copy: a pointer into fs would keep its records
				name = &topic
				pl.topicNames[topic] = name
			}
			for k := range t.Partitions {
				part := &t.Partitions[k]
				for recs := part.Records; len(recs) > 0; {
					c := min(chunk, len(recs))
					pl.batches = append(pl.batches, batch{topic: name, partition: part.Partition, recs: recs[:c], at: n})
					n += c
					recs = recs[c:]
				}
			}
		}
	}
	if len(pl.workers) < 2 || len(pl.batches) < 2 {
		return false
	}
	if cap(pl.results) < n {
		pl.results = make([]result, n)
	}
	pl.results = pl.results[:n]
	return true
}

// release drops the poll's record pointers once its records are
// produced: the client holds each output only until it is acknowledged,
// and the poll's batches must not keep them (and the fetched batches they
// point into) alive while the next poll is fetched and processed.
func (pl *pool) release() {
	clear(pl.batches)
	pl.batches = pl.batches[:0]
}

// arm readies the coordination for the batches of a poll and returns how
// many workers share them.
func (pl *pool) arm() int {
	pl.next.Store(0)
	pl.halt.Store(false)
	if cap(pl.done) < len(pl.batches) {
		pl.done = make([]atomic.Bool, len(pl.batches))
	}
	pl.done = pl.done[:len(pl.batches)]
	for i := range pl.done {
		pl.done[i].Store(false)
	}
	if pl.ready == nil {
		pl.ready = make(chan struct{}, 1)
	}
	n := min(len(pl.workers), len(pl.batches))
	pl.wg.Add(n)
	return n
}

// startWorkers starts the workers on the pool's batches: each takes the
// next batch not yet taken and runs its records through its chain, marking
// the batch done; the loop goroutine meanwhile produces the finished
// batches' outputs in order (pool.wait). pool.stop must follow.
//
// The workers read the pipeline's state (options, poison and missing
// topics) but change none of it; what the records' outcomes change, the
// loop applies, record by record in partition order, and it changes
// nothing the workers read while they run.
func (p *Pipeline) startWorkers() {
	for i := range p.pool.arm() {
		go p.runWorker(i)
	}
}

// runWorker is worker i's share of the batches.
func (p *Pipeline) runWorker(i int) {
	defer p.pool.wg.Done()
	w := &p.pool.workers[i]
	for {
		bi := int(p.pool.next.Add(1)) - 1
		if bi >= len(p.pool.batches) {
			return
		}
		b := &p.pool.batches[bi]
		w.slot.publish(b.topic, b.partition)
		halted := p.pool.halt.Load()
		for j, r := range b.recs {
			res := &p.pool.results[b.at+j]
			*res = result{}
			if halted {
				res.notRun = true
				continue
			}
			select {
			case <-p.open.ctx.Done():
				res.notRun = true
				continue
			default:
			}
			if r.Attrs.IsControl() {
				continue
			}
			src := transform.Source{Topic: *b.topic, Partition: b.partition, Offset: r.Offset}
			r.Topic = ""
			if len(p.book.poison) > 0 {
				if _, ok := p.book.poison[src]; ok {
					continue // the loop applies the policy
				}
			}
			from := len(w.out)
			w.out, res.stage, res.attempts, res.err = p.run(w, src, r, w.out)
			res.out = w.out[from:len(w.out):len(w.out)]
		}
		p.pool.finish(bi)
	}
}

// finish marks batch bi done and tells the loop.
func (pl *pool) finish(bi int) {
	pl.done[bi].Store(true)
	select {
	case pl.ready <- struct{}{}:
	default: // a signal is pending already
	}
}

// wait returns once batch bi is done.
func (pl *pool) wait(bi int) {
	for !pl.done[bi].Load() {
		<-pl.ready
	}
}

// stop tells the workers to run no more records (the loop returned early:
// the transaction aborts), waits for them, and drops the record pointers
// their outputs hold.
func (pl *pool) stop() {
	pl.halt.Store(true)
	pl.wg.Wait()
	select {
	case <-pl.ready:
	default:
	}
	pl.clear()
}

// clear drops the record pointers the workers' outputs hold, once the
// loop has produced them.
func (pl *pool) clear() {
	for i := range pl.workers {
		clear(pl.workers[i].out)
		pl.workers[i].out = pl.workers[i].out[:0]
	}
}
