package app

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
)

// tryState is the state stores of `processor try` in memory: what each
// sample's transaction committed is seen by the next samples, as in the
// processor; nothing is written to a changelog or a disk.
type tryState struct {
	mu        sync.Mutex
	committed map[string][]byte // store, partition and key
}

func newTryState() *tryState { return &tryState{committed: map[string][]byte{}} }

// Begin implements pipeline.State.
func (s *tryState) Begin() (pipeline.StateTxn, error) {
	return &tryStateTxn{s: s, writes: map[string]*[]byte{}}, nil
}

// Restore implements pipeline.State: every partition is always ready.
func (s *tryState) Restore(context.Context, []int32) error { return nil }

// Revoke implements pipeline.State.
func (s *tryState) Revoke([]int32) {}

// Status implements pipeline.State.
func (s *tryState) Status() any { return nil }

// Topics implements pipeline.State: try writes no changelog.
func (s *tryState) Topics() []string { return nil }

// Journal implements pipeline.State.
func (s *tryState) Journal(func(string) int) pipeline.StateJournal { return &tryJournal{} }

// tryJournal undoes the writes of a sample that failed, as the
// processor's state.Journal does.
type tryJournal struct{ undo []func() }

// Store implements pipeline.StateJournal.
func (j *tryJournal) Store(t pipeline.StateTxn, name string, partition int32) (transform.Store, error) {
	st, err := t.Store(name, partition)
	if err != nil {
		return nil, err
	}
	s := st.(tryStore)
	s.j = j
	return s, nil
}

// Mark implements pipeline.StateJournal.
func (j *tryJournal) Mark() int64 { j.undo = j.undo[:0]; return 0 }

// Undo implements pipeline.StateJournal.
func (j *tryJournal) Undo() {
	for i := len(j.undo) - 1; i >= 0; i-- {
		j.undo[i]()
	}
	j.undo = j.undo[:0]
}

// tryStateTxn is one transaction's writes; a nil value is a deletion.
type tryStateTxn struct {
	s      *tryState
	mu     sync.Mutex
	writes map[string]*[]byte
}

// Store implements pipeline.StateTxn.
func (t *tryStateTxn) Store(name string, partition int32) (transform.Store, error) {
	return tryStore{t: t, prefix: name + "/" + strconv.Itoa(int(partition)) + "/"}, nil
}

// Expire implements pipeline.StateTxn: samples are too few to expire.
func (t *tryStateTxn) Expire(context.Context, string, int32, time.Time, int, int) (int, int, error) {
	return 0, 0, nil
}

// ExpireEach implements pipeline.StateTxn: samples are too few to expire.
func (t *tryStateTxn) ExpireEach(context.Context, string, int32, time.Time, int, int, func([]byte, []byte, time.Time) error) (int, int, error) {
	return 0, 0, nil
}

// Records implements pipeline.StateTxn: try has no changelog.
func (t *tryStateTxn) Records() []*kgo.Record { return nil }

// Commit implements pipeline.StateTxn.
func (t *tryStateTxn) Commit() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	for k, v := range t.writes {
		if v == nil {
			delete(t.s.committed, k)
		} else {
			t.s.committed[k] = *v
		}
	}
	return nil
}

// Abort implements pipeline.StateTxn.
func (t *tryStateTxn) Abort() {}

// tryStore is one store's partition in a tryStateTxn.
type tryStore struct {
	t      *tryStateTxn
	prefix string
	j      *tryJournal // nil: not journaled
}

// set writes v (nil: a deletion) to k in the transaction, journaled.
func (st tryStore) set(k string, v *[]byte) {
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
	st.t.writes[k] = v
}

// Get implements transform.Store.
func (st tryStore) Get(key []byte) ([]byte, bool, error) {
	k := st.prefix + string(key)
	st.t.mu.Lock()
	v, ok := st.t.writes[k]
	st.t.mu.Unlock()
	if ok {
		if v == nil {
			return nil, false, nil
		}
		return *v, true, nil
	}
	st.t.s.mu.Lock()
	defer st.t.s.mu.Unlock()
	c, ok := st.t.s.committed[k]
	return c, ok, nil
}

// Put implements transform.Store.
func (st tryStore) Put(key, value []byte, _ time.Time) error {
	v := append([]byte(nil), value...)
	st.set(st.prefix+string(key), &v)
	return nil
}

// Delete implements transform.Store.
func (st tryStore) Delete(key []byte) error {
	st.set(st.prefix+string(key), nil)
	return nil
}
