package pipeline

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// pool is the workers and the poll they share: the last poll's records in
// batches, the outcome of each record, and the workers' coordination
// within one poll (see startWorkers).
type pool struct {
	workers []worker // workers[0] runs chain; workers[solo] runs on the loop's goroutine when a poll is not shared
	batches []batch  // the last poll's records, in runs of one partition's
	results []result // the workers' outcomes, one per record of batches

	next  atomic.Int64  // the next batch to take
	halt  atomic.Bool   // run no more records
	done  []atomic.Bool // per batch: its records have run
	ready chan struct{} // a batch is done since the loop last looked
	wg    sync.WaitGroup

	topicNames map[string]*string // input topic names, for the workers' slots

	order order // how the workers share a partition's records (see deal)
	seed  maphash.Seed
	solo  int // the worker whose chain runs a poll that is not shared
	// ran is, under orderKey, per record of batches: it has run (the loop
	// waits for each record, not for a batch).
	ran   []atomic.Bool
	marks []int // deal's scratch: per worker, where its share of a batch begins
	// lanes is, under orderKey, how many workers one partition's records
	// are dealt to (transform.Chain.InFlight); 0: all of them, by hash.
	lanes int
	// keys and load are the scratch of dealing by load (lanes.go): per key
	// of a partition its weight and lane, per worker its records.
	keys map[laneKey]laneOf
	load []int
	// passThrough: the chain passes its input through unchanged
	// (transform.Chain.PassThrough, the identity chain), so no poll is
	// shared: the loop runs it, with nothing to hand over to a worker.
	passThrough bool
}

// newPool returns the pool of one worker per chain: chain, then chains,
// sharing the records of an ordered chain by ordering.
func newPool(chain *transform.Chain, chains []*transform.Chain, ordering Ordering) pool {
	ws := make([]worker, 1+len(chains))
	ws[0].chain = chain
	for i, c := range chains {
		ws[1+i].chain = c
	}
	o := orderShared
	if chain.Ordered() {
		o = orderPartition
		if ordering == OrderKey {
			o = orderKey
		}
	}
	lanes, _ := chain.InFlight()
	return pool{workers: ws, topicNames: make(map[string]*string), order: o, seed: maphash.MakeSeed(), marks: make([]int, len(ws)), lanes: lanes,
		passThrough: chain.PassThrough()}
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
	// stateBytes is what the record's state writes add to the changelogs.
	stateBytes int64
	// late are the stores that found the record late (late.go).
	late []string
	// origin is, for a record of the repartition topic, the input it was
	// made from: its outputs' lineage.
	origin record.Source
}

// worker runs records through its own chain: a Chain, and the transforms
// in it, serve one goroutine at a time.
type worker struct {
	chain *transform.Chain
	// after is the chain's second segment, which runs the records of the
	// repartition topic (nil without a hop; chain is then the first).
	after *transform.Chain
	out   []*kgo.Record // the outputs of the records it ran in this poll
	// ctx is the open transaction's context, which the monitor cuts when
	// the worker's record has run for its limit (renewed after a cut).
	ctx  context.Context
	slot slot // what it is running, for the monitor
	// tasks are, for an ordered chain, the records it runs in this poll,
	// in the loop's order (see deal); idx holds their positions.
	tasks []task
	idx   []int32
	// stores are the state stores for its records (nil without state).
	stores *storeHolder
}

// minChunk is the fewest records a worker takes at a time (unless a
// partition has fewer in the poll): a chunk costs one atomic addition.
const minChunk = 16

// split cuts the poll's records into batches, each a run of one
// partition's records in offset order, and says whether the workers should
// run them: more than one worker, and more than one batch to share among
// them. With workers, a partition's records are cut into chunks of about a
// quarter of each worker's share, because a poll over a backlog often
// holds thousands of records of one partition and a few of another; the
// chunks shrink towards the poll's end (to half a worker's share of what
// is left, at least minChunk), so that the workers finish the poll at
// about the same time rather than one running a large last chunk alone
// while the other waits for the next poll. An ordered chain's batches are
// whole partitions, which deal gives out.
func (pl *pool) split(fs kgo.Fetches) bool {
	clear(pl.batches) // drop the last poll's record pointers
	pl.batches = pl.batches[:0]
	pl.solo = 0
	chunk, left, shares := int(^uint(0)>>1), fs.NumRecords(), 0
	if len(pl.workers) > 1 && pl.order == orderShared && !pl.passThrough {
		chunk, shares = max(minChunk, left/(4*len(pl.workers))), 2*len(pl.workers)
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
					if shares > 0 {
						c = min(c, max(minChunk, left/shares))
					}
					left -= c
					pl.batches = append(pl.batches, batch{topic: name, partition: part.Partition, recs: recs[:c], at: n})
					n += c
					recs = recs[c:]
				}
			}
		}
	}
	if len(pl.workers) > 1 && pl.order != orderShared {
		if !pl.deal(n) {
			return false
		}
	} else if len(pl.workers) < 2 || len(pl.batches) < 2 || pl.passThrough {
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
// many workers may share them (busy says which do).
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
	if pl.order != orderShared {
		n = len(pl.workers) // those with tasks run them (busy)
	}
	return n
}

// busy reports whether worker i of the n that arm returned has records to
// run in this poll.
func (pl *pool) busy(i int) bool {
	return pl.order == orderShared || len(pl.workers[i].tasks) > 0
}

// startWorkers starts the workers on the pool's batches: each takes the
// next batch not yet taken and runs its records through its chain, marking
// the batch done; the loop goroutine meanwhile produces the finished
// batches' outputs in order (pool.wait). For an ordered chain each worker
// with a share of the poll runs its tasks instead (deal, runTasks).
// pool.stop must follow.
//
// The workers read the pipeline's state (options, poison and missing
// topics) but change none of it; what the records' outcomes change, the
// loop applies, record by record in partition order, and it changes
// nothing the workers read while they run.
func (p *Pipeline) startWorkers() {
	for i := range p.pool.arm() {
		if p.pool.busy(i) {
			p.pool.wg.Add(1)
			go p.runWorker(i)
		}
	}
}

// runWorker is worker i's share of the batches.
func (p *Pipeline) runWorker(i int) {
	defer p.pool.wg.Done()
	w := &p.pool.workers[i]
	if p.pool.order != orderShared {
		p.runTasks(w)
		return
	}
	for {
		bi := int(p.pool.next.Add(1)) - 1
		if bi >= len(p.pool.batches) {
			return
		}
		b := &p.pool.batches[bi]
		w.slot.publish(b.topic, b.partition)
		for j := range b.recs {
			p.runRecord(w, b, j)
		}
		p.pool.finish(bi)
	}
}

// runRecord runs record j of b through w's chain into its result, or marks
// it not run once the loop has halted the workers or the transaction's
// context has ended.
func (p *Pipeline) runRecord(w *worker, b *batch, j int) {
	r := b.recs[j]
	res := &p.pool.results[b.at+j]
	*res = result{}
	if p.pool.halt.Load() {
		res.notRun = true
		return
	}
	select {
	case <-p.open.ctx.Done():
		res.notRun = true
		return
	default:
	}
	if r.Attrs.IsControl() {
		return
	}
	src := record.Source{Topic: *b.topic, Partition: b.partition, Offset: r.Offset}
	r.Topic = ""
	if len(p.book.poison) > 0 {
		if _, ok := p.book.poison[src]; ok {
			return // the loop applies the policy
		}
	}
	switch {
	case p.fromHop(src.Topic):
		res.origin = p.origin(src, r)
	case p.o.Replay:
		res.origin = replayOrigin(src, r)
	}
	from := len(w.out)
	if w.stores != nil {
		w.stores.stream = p.streamAt(b.at + j)
	}
	w.out, res.stage, res.attempts, res.err = p.run(w, src, r, w.out)
	res.out = w.out[from:len(w.out):len(w.out)]
	if w.stores != nil {
		res.stateBytes = w.stores.bytes
		res.late = w.stores.takeLates(res.err)
	}
}

// finish marks batch bi done and tells the loop.
func (pl *pool) finish(bi int) {
	pl.done[bi].Store(true)
	pl.signal()
}

// signal tells the loop that a batch or a record is done.
func (pl *pool) signal() {
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
