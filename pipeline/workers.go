package pipeline

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// batch is one partition's records of a poll, in offset order.
type batch struct {
	topic     string
	partition int32
	recs      []*kgo.Record
	at        int // index of recs[0] in Pipeline.results
}

// result is what a worker's chain made of one input record: its outputs
// are workers[worker].out[from:to]; or stage, attempts and err say why it
// failed (as runChain returns them).
type result struct {
	worker   int
	from, to int
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
}

// split groups the poll's records by partition into p.batches, and says
// whether the workers should run them: more than one worker, and more than
// one partition to share among them.
func (p *Pipeline) split(fs kgo.Fetches) bool {
	clear(p.batches) // drop the last poll's record pointers
	p.batches = p.batches[:0]
	n := 0
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			for k := range t.Partitions {
				part := &t.Partitions[k]
				if len(part.Records) == 0 {
					continue
				}
				p.batches = append(p.batches, batch{topic: t.Topic, partition: part.Partition, recs: part.Records, at: n})
				n += len(part.Records)
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

// runWorkers runs every record of p.batches through a chain, the
// partitions shared among the workers (each takes the next partition not
// yet taken, so a large partition does not hold up the others), and
// returns when all are done. The loop goroutine is the first worker. A
// record the transaction's budget runs out before is not run.
//
// The workers read the pipeline's state (options, poison and missing
// topics) but change none of it; what the records' outcomes change, the
// loop applies afterwards, record by record in partition order.
func (p *Pipeline) runWorkers() {
	var next atomic.Int64
	var wg sync.WaitGroup
	n := min(len(p.workers), len(p.batches))
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p.work1(i, &next)
		}(i)
	}
	p.work1(0, &next)
	wg.Wait()
}

// work1 is worker i's share of runWorkers.
func (p *Pipeline) work1(i int, next *atomic.Int64) {
	w := &p.workers[i]
	for {
		bi := int(next.Add(1)) - 1
		if bi >= len(p.batches) {
			return
		}
		b := &p.batches[bi]
		for j, r := range b.recs {
			res := &p.results[b.at+j]
			*res = result{worker: i}
			select {
			case <-p.txn.Done():
				res.notRun = true
				continue
			default:
			}
			if r.Attrs.IsControl() {
				continue
			}
			src := transform.Source{Topic: b.topic, Partition: b.partition, Offset: r.Offset}
			r.Topic = ""
			if len(p.poison) > 0 {
				if _, ok := p.poison[src]; ok {
					continue // the loop applies the policy
				}
			}
			res.from = len(w.out)
			w.out, res.stage, res.attempts, res.err = p.runChain(w.chain, src, r, w.out)
			res.to = len(w.out)
		}
	}
}

// clearWorkers drops the record pointers the workers' outputs hold, once
// the loop has produced them.
func (p *Pipeline) clearWorkers() {
	for i := range p.workers {
		clear(p.workers[i].out)
		p.workers[i].out = p.workers[i].out[:0]
	}
}
