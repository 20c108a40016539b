package state

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// lookup finds the previous entries of a partition's keys for apply.
type lookup struct {
	l  *local
	pw *partWrites
	it *pebble.Iterator // opened at the first seek
}

// prior fills in w's previous entry (had, oldExp, oldLen), unless the
// transaction read it already (known) or pw.seen says that the partition
// never had the key (a rebuild from empty); dk is w's data key. It
// returns the hash of w's key in pw.seen, 0 without one.
func (lk *lookup) prior(w *write, dk []byte) (uint64, error) {
	var h uint64
	if seen := lk.pw.seen; seen != nil {
		h = seen.hash(w.key)
		if !w.known && !seen.has(h) {
			w.had = false
			seen.skipped++
			return h, nil
		}
	}
	if w.known {
		return h, nil
	}
	p := lk.pw.p
	if lk.it == nil {
		pre := p.prefix()
		it, err := lk.l.db.NewIter(&pebble.IterOptions{LowerBound: dataKey(pre, nil), UpperBound: append(pre, kindData+1)})
		if err != nil {
			return h, fmt.Errorf("state: reading %s/%d: %w", p.topic, p.partition, err)
		}
		lk.it = it
	}
	it := lk.it
	w.had = it.SeekGE(dk) && bytes.Equal(it.Key(), dk)
	if !w.had {
		return h, nil
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return h, fmt.Errorf("state: reading a stored key of %s/%d: %w", p.topic, p.partition, err)
	}
	if len(v) < 8 {
		return h, fmt.Errorf("state: a stored key of %s/%d has a value of %d bytes, under the 8 of its expiry", p.topic, p.partition, len(v))
	}
	w.oldExp, w.oldLen = expiryOf(v), len(v)-8
	return h, nil
}

// close closes the iterator, if one was opened, and returns its error.
func (lk *lookup) close() error {
	if lk.it == nil {
		return nil
	}
	err := lk.it.Error()
	if cerr := lk.it.Close(); err == nil {
		err = cerr
	}
	lk.it = nil
	if err != nil {
		return fmt.Errorf("state: reading %s/%d: %w", lk.pw.p.topic, lk.pw.p.partition, err)
	}
	return nil
}
