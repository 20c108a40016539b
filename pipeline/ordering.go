package pipeline

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// An ordered chain (transform.Ordered) must see each partition's, or each
// key's, records in input order, and on the same instance from poll to
// poll; a chain that is not ordered takes any record on any worker, in
// runs shared among the workers as they come free (pool.split). For an
// ordered chain, deal gives each worker its share of a poll before the
// workers start:
//
//   - orderPartition: a partition's records all go to its home worker.
//   - orderKey: a record goes to the worker its key hashes to; a record
//     with a null key (or a transaction marker) to its partition's home.
//     A chain that bounds the records of a partition at once (lanes)
//     has its keys dealt by load instead (lanes.go).
//
// A worker runs its share in the loop's order, so the loop, which produces
// the outputs in input order, seldom waits on one worker while another
// has the next record done. Under orderKey the loop waits record by
// record (pool.ran), not batch by batch.

// order is how the workers share a poll's records.
type order uint8

const (
	orderShared    order = iota // the chain is not ordered: runs of a partition's records go to any worker
	orderPartition              // Options.Ordering OrderPartition, with an ordered chain
	orderKey                    // Options.Ordering OrderKey, with an ordered chain
)

// task is part of a batch that one worker runs: all its records, or those
// at the positions idx[from:to] of the worker's idx.
type task struct {
	b        int // index in pool.batches
	all      bool
	from, to int
}

// home returns the worker that runs b's partition under orderPartition,
// and its null-key records under orderKey. Consecutive partitions of a
// topic have consecutive homes.
func (pl *pool) home(b *batch) int {
	return int((maphash.String(pl.seed, *b.topic) + uint64(b.partition)) % uint64(len(pl.workers)))
}

// keyWorker returns the worker that runs r, of a batch whose home is home,
// under orderKey when the chain does not bound the records of a partition
// at once (lanes 0; otherwise loadWorker deals): one of all the workers
// by its key's hash.
func (pl *pool) keyWorker(r *kgo.Record, home int) int {
	if r.Key == nil || r.Attrs.IsControl() {
		return home
	}
	return int(maphash.Bytes(pl.seed, r.Key) % uint64(len(pl.workers)))
}

// deal gives each worker its tasks for the poll's n records, and reports
// whether more than one worker has any; when one has, the loop runs the
// poll on its chain (pool.solo).
func (pl *pool) deal(n int) bool {
	for i := range pl.workers {
		w := &pl.workers[i]
		w.tasks, w.idx = w.tasks[:0], w.idx[:0]
	}
	if pl.order == orderKey && pl.lanes > 0 {
		pl.weigh()
	}
	for bi := range pl.batches {
		b := &pl.batches[bi]
		home := pl.home(b)
		if pl.order == orderPartition {
			w := &pl.workers[home]
			w.tasks = append(w.tasks, task{b: bi, all: true})
			continue
		}
		for i := range pl.workers {
			pl.marks[i] = len(pl.workers[i].idx)
		}
		for j, r := range b.recs {
			var w *worker
			if pl.lanes > 0 {
				w = &pl.workers[pl.loadWorker(b, r, home)]
			} else {
				w = &pl.workers[pl.keyWorker(r, home)]
			}
			w.idx = append(w.idx, int32(j))
		}
		for i := range pl.workers {
			w := &pl.workers[i]
			if from := pl.marks[i]; len(w.idx) > from {
				w.tasks = append(w.tasks, task{b: bi, from: from, to: len(w.idx)})
			}
		}
	}
	busy := 0
	for i := range pl.workers {
		if len(pl.workers[i].tasks) > 0 {
			busy++
			pl.solo = i
		}
	}
	if busy < 2 {
		return false
	}
	if pl.order == orderKey {
		if cap(pl.ran) < n {
			pl.ran = make([]atomic.Bool, n)
		}
		pl.ran = pl.ran[:n]
		for i := range pl.ran {
			pl.ran[i].Store(false)
		}
	}
	return true
}

// runTasks runs w's tasks of the poll, in order.
func (p *Pipeline) runTasks(w *worker) {
	for _, t := range w.tasks {
		b := &p.pool.batches[t.b]
		w.slot.publish(b.topic, b.partition)
		if t.all {
			for j := range b.recs {
				p.runRecord(w, b, j)
			}
			p.pool.finish(t.b)
			continue
		}
		for _, j := range w.idx[t.from:t.to] {
			p.runRecord(w, b, int(j))
			p.pool.ran[b.at+int(j)].Store(true)
			p.pool.signal()
		}
	}
}

// waitRecord returns once the record at index i of pool.results has run,
// under orderKey.
func (pl *pool) waitRecord(i int) {
	for !pl.ran[i].Load() {
		<-pl.ready
	}
}
