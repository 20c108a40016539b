package pipelinetest

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
)

// state is the state stores of the driver in memory: what each
// input's transaction committed is seen by the next inputs, as in the
// processor; nothing is written to a changelog or a disk. Entries expire
// by stream time as in the state package: Expire moves a store
// partition's time (never back, but for an abort), Get hides an entry
// expired by it, and Expire and ExpireEach delete the expired entries in
// the order of (expiry, key), so that windows with EMIT=close close and
// a dedupe's TTL ends here as in the processor.
type state struct {
	mu        sync.Mutex
	committed map[string]entry // store, partition and key
	stream    map[string]int64 // store and partition -> its time, Unix ns
}

// entry is a value and the expiry it was written with (Unix ns, 0:
// none).
type entry struct {
	v   []byte
	exp int64
}

func newState() *state {
	return &state{committed: map[string]entry{}, stream: map[string]int64{}}
}

// Begin implements pipeline.State.
func (s *state) Begin() (pipeline.StateTxn, error) {
	return &stateTxn{s: s, writes: map[string]*entry{}, streams: map[string]int64{}}, nil
}

// Restore implements pipeline.State: every partition is always ready.
func (s *state) Restore(context.Context, []int32) error { return nil }

// Revoke implements pipeline.State.
func (s *state) Revoke([]int32) {}

// Status implements pipeline.State.
func (s *state) Status() any { return nil }

// Topics implements pipeline.State: nothing is written to a changelog.
func (s *state) Topics() []string { return nil }

// Journal implements pipeline.State.
func (s *state) Journal(func(string) int) pipeline.StateJournal { return &journal{} }

// journal undoes the writes of an input that failed, as the
// processor's state.Journal does.
type journal struct{ undo []func() }

// Store implements pipeline.StateJournal.
func (j *journal) Store(t pipeline.StateTxn, name string, partition int32) (transform.Store, error) {
	st, err := t.Store(name, partition)
	if err != nil {
		return nil, err
	}
	s := st.(store)
	s.j = j
	return s, nil
}

// Mark implements pipeline.StateJournal.
func (j *journal) Mark() int64 { j.undo = j.undo[:0]; return 0 }

// Undo implements pipeline.StateJournal.
func (j *journal) Undo() {
	for i := len(j.undo) - 1; i >= 0; i-- {
		j.undo[i]()
	}
	j.undo = j.undo[:0]
}

// stateTxn is one transaction's writes (a nil entry is a deletion)
// and the store partitions' times as they were before its Expire calls
// moved them, which an abort puts back.
type stateTxn struct {
	s       *state
	mu      sync.Mutex
	writes  map[string]*entry
	streams map[string]int64
}

// partPrefix is the prefix of the keys of a store's partition.
func partPrefix(name string, partition int32) string {
	return name + "/" + strconv.Itoa(int(partition)) + "/"
}

// Store implements pipeline.StateTxn.
func (t *stateTxn) Store(name string, partition int32) (transform.Store, error) {
	return store{t: t, prefix: partPrefix(name, partition)}, nil
}

// Expire implements pipeline.StateTxn.
func (t *stateTxn) Expire(ctx context.Context, store string, partition int32, now time.Time, limit, maxBytes int) (int, int, error) {
	return t.ExpireEach(ctx, store, partition, now, limit, maxBytes, nil)
}

// ExpireEach implements pipeline.StateTxn: it moves the partition's time
// to now and deletes the entries expired by it, oldest first, within
// limit entries (0: no bound) and maxBytes of their keys.
func (t *stateTxn) ExpireEach(_ context.Context, store string, partition int32, now time.Time, limit, maxBytes int,
	fn func([]byte, []byte, time.Time) error) (int, int, error) {
	prefix := partPrefix(store, partition)
	at := now.UnixNano()
	t.s.mu.Lock()
	if _, ok := t.streams[prefix]; !ok {
		t.streams[prefix] = t.s.stream[prefix]
	}
	t.s.stream[prefix] = max(t.s.stream[prefix], at)
	type expired struct {
		key string
		e   entry
	}
	var due []expired
	t.mu.Lock()
	for k, e := range t.s.committed {
		if _, written := t.writes[k]; !written && strings.HasPrefix(k, prefix) && e.exp != 0 && e.exp <= at {
			due = append(due, expired{k, e})
		}
	}
	for k, e := range t.writes {
		if e != nil && strings.HasPrefix(k, prefix) && e.exp != 0 && e.exp <= at {
			due = append(due, expired{k, *e})
		}
	}
	t.s.mu.Unlock()
	slices.SortFunc(due, func(x, y expired) int { return cmp.Or(cmp.Compare(x.e.exp, y.e.exp), cmp.Compare(x.key, y.key)) })
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	n, bytes := 0, 0
	for _, d := range due {
		if (limit > 0 && n >= limit) || bytes >= maxBytes {
			break
		}
		t.writes[d.key] = nil
		n, bytes = n+1, bytes+len(d.key)-len(prefix)
	}
	t.mu.Unlock()
	for _, d := range due[:n] {
		if fn == nil {
			continue
		}
		if err := fn([]byte(d.key[len(prefix):]), d.e.v, time.Unix(0, d.e.exp)); err != nil {
			return n, bytes, err
		}
	}
	return n, bytes, nil
}

// Records implements pipeline.StateTxn: there is no changelog.
func (t *stateTxn) Records() []*kgo.Record { return nil }

// Commit implements pipeline.StateTxn.
func (t *stateTxn) Commit() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for k, e := range t.writes {
		if e == nil {
			delete(t.s.committed, k)
		} else {
			t.s.committed[k] = *e
		}
	}
	return nil
}

// Abort implements pipeline.StateTxn: the store partitions' times go
// back to what they were, as the aborted records are processed again.
func (t *stateTxn) Abort() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for k, at := range t.streams {
		t.s.stream[k] = at
	}
}

// store is one store's partition in a stateTxn.
type store struct {
	t      *stateTxn
	prefix string
	j      *journal // nil: not journaled
}

// set writes e (nil: a deletion) to k in the transaction, journaled.
func (st store) set(k string, e *entry) {
	st.t.mu.Lock()
	defer st.t.mu.Unlock()
	if st.j != nil {
		old, had := st.t.writes[k]
		st.j.undo = append(st.j.undo, func() {
			st.t.mu.Lock()
			defer st.t.mu.Unlock()
			if had {
				st.t.writes[k] = old
			} else {
				delete(st.t.writes, k)
			}
		})
	}
	st.t.writes[k] = e
}

// Get implements transform.Store: an entry expired by the partition's
// time is not there.
func (st store) Get(key []byte) ([]byte, bool, error) {
	k := st.prefix + string(key)
	st.t.mu.Lock()
	w, written := st.t.writes[k]
	st.t.mu.Unlock()
	st.t.s.mu.Lock()
	defer st.t.s.mu.Unlock()
	e, ok := st.t.s.committed[k]
	if written {
		if w == nil {
			return nil, false, nil
		}
		e, ok = *w, true
	}
	if !ok || (e.exp != 0 && e.exp <= st.t.s.stream[st.prefix]) {
		return nil, false, nil
	}
	return e.v, true, nil
}

// Put implements transform.Store.
func (st store) Put(key, value []byte, expiresAt time.Time) error {
	e := &entry{v: append([]byte(nil), value...)}
	if !expiresAt.IsZero() {
		e.exp = max(expiresAt.UnixNano(), 1)
	}
	st.set(st.prefix+string(key), e)
	return nil
}

// Delete implements transform.Store.
func (st store) Delete(key []byte) error {
	st.set(st.prefix+string(key), nil)
	return nil
}
