package state

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// committer commits a restore's batches on a goroutine of its own, in
// the order they were handed on, so that inserting one batch into
// Pebble's memtable (the larger part of writing it) overlaps building
// the next one from the changelog. At most one batch is being committed
// and one waits to be handed on, so a restore holds at most two batches
// more than it did writing them itself.
//
// The order is the database's order: a batch is committed after every
// batch handed on before it, and what reads the database on the
// restore's side (the lookups of a key's previous entry, a partition's
// wipe) settles first, waiting for every batch handed on to be
// committed. So the restored state is the same as with each batch
// committed where it was built.
type committer struct {
	l    *local
	jobs chan commitJob
	exit chan struct{}
	last chan struct{} // closed when the batch handed on last is committed; the restore's goroutine's
	mu   sync.Mutex
	err  error // the first commit's error
}

// commitJob is one batch to commit: after runs once it is committed.
type commitJob struct {
	b     *pebble.Batch
	sync  bool
	after func()
	done  chan struct{}
}

// startCommitter starts the committing goroutine; stop ends it.
func startCommitter(l *local) *committer {
	c := &committer{l: l, jobs: make(chan commitJob), exit: make(chan struct{})}
	go c.run()
	return c
}

// run commits the jobs in order until stop; after an error it only
// closes the jobs handed on.
func (c *committer) run() {
	defer close(c.exit)
	for j := range c.jobs {
		if c.failed() == nil {
			if err := c.l.commit(j.b, j.sync, 1); err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
			} else {
				j.after()
			}
		}
		_ = j.b.Close()
		close(j.done)
	}
}

// failed returns the first commit's error, nil if none.
func (c *committer) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// hand hands b on to be committed (synced when sync), after runs once it
// is; it fails, closing b, when an earlier commit failed.
func (c *committer) hand(b *pebble.Batch, sync bool, after func()) error {
	if err := c.failed(); err != nil {
		_ = b.Close()
		return err
	}
	done := make(chan struct{})
	c.jobs <- commitJob{b: b, sync: sync, after: after, done: done}
	c.last = done
	return nil
}

// settle waits until every batch handed on is committed and returns the
// first commit's error.
func (c *committer) settle() error {
	if c.last != nil {
		<-c.last
	}
	return c.failed()
}

// stop waits for the batches handed on, ends the goroutine and returns
// the first commit's error.
func (c *committer) stop() error {
	close(c.jobs)
	<-c.exit
	return c.failed()
}
