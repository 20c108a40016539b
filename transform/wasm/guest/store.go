package guest

import (
	"errors"
	"fmt"
)

// StateStore is one of the module's state stores: keyed bytes that the
// processor keeps exactly once, partitioned like the input, as it keeps
// the stores of its aggregate and dedupe transforms (docs/state.md). A
// store must be declared in the wasm transform's STORES setting
// (PROCESSOR_WASM_STORES=counts); a module's calls reach the partition of
// the record being processed, inside the open Kafka transaction.
//
// Use a store only from the Func that Handle registered, while it runs:
// outside a call there is no record, and so no partition. The record's
// writes take effect when it succeeds: a Func that returns an error (or
// panics, or runs past the deadline) leaves every store as it was, and a
// Get sees the record's own earlier writes.
//
// A store error on the host (a store not restored, say) fails the record
// with the host's error, whatever the Func returns; the method that met
// it returns ErrStore, so the Func can stop early.
//
// Built for another platform than wasip1 (unit tests of a plugin's logic,
// run natively), every store is an in-memory map of the test process,
// and every name is declared.
type StateStore struct {
	name string
	idx  int32 // the index in STORES; unresolved before the first use
}

// Errors the methods of StateStore return.
var (
	// ErrStore: the host's store failed; the host fails the record with
	// its own error, which says why.
	ErrStore = errors.New("guest: the state store failed (the host fails the record with the reason)")
)

const unresolved = -3

var stores = map[string]*StateStore{}

// Store returns the state store name. It does not call the host: the
// name is looked up among the declared stores on the first use, so Store
// may be called from init, or on every call (it allocates only the first
// time for a name).
func Store(name string) *StateStore {
	if s, ok := stores[name]; ok {
		return s
	}
	s := &StateStore{name: name, idx: unresolved}
	stores[name] = s
	return s
}

// Name returns the store's name.
func (s *StateStore) Name() string { return s.name }

// index resolves the store among the declared ones.
func (s *StateStore) index() (int32, error) {
	if s.idx == unresolved {
		s.idx = storeIndex(s.name)
	}
	if s.idx < 0 {
		s.idx = unresolved // a module may be loaded with other settings; ask again next time
		return 0, fmt.Errorf("guest: state store %q is not declared: add it to the wasm transform's STORES setting", s.name)
	}
	return s.idx, nil
}

// scratch is the buffer Get reads into first, grown to the largest value
// read; values are then copied out of it.
var scratch = make([]byte, 256)

// Get returns a copy of key's value, or ok false when it has none (or it
// expired). One host call when the value fits in 256 bytes or in the
// largest value read before, two otherwise; one allocation for the copy
// (AppendGet into a reused buffer allocates none).
func (s *StateStore) Get(key []byte) (value []byte, ok bool, err error) {
	v, ok, err := s.AppendGet(scratch[:0], key)
	if cap(v) > cap(scratch) {
		scratch = v[:0]
	}
	if !ok || err != nil {
		return nil, ok, err
	}
	return append([]byte(nil), v...), true, nil
}

// AppendGet appends key's value to dst and returns the extended buffer,
// or dst and ok false when key has none. The host writes the value
// straight into dst's spare capacity when it fits; otherwise dst is grown
// and the host asked again (two host calls, one allocation).
func (s *StateStore) AppendGet(dst, key []byte) (value []byte, ok bool, err error) {
	i, err := s.index()
	if err != nil {
		return dst, false, err
	}
	for {
		spare := dst[len(dst):cap(dst)]
		n := storeGet(i, key, spare)
		switch {
		case n == resultNone:
			return dst, false, nil
		case n < 0:
			return dst, false, ErrStore
		case int(n) <= len(spare):
			return dst[:len(dst)+int(n)], true, nil
		}
		grown := make([]byte, len(dst), len(dst)+int(n))
		copy(grown, dst)
		dst = grown
	}
}

// Put sets key to value in the record's transaction. A non-zero expiresAt,
// in record time (Unix milliseconds, like Record.Timestamp: a timestamp
// plus a window, say), lets the processor delete the entry once the
// partition's record time passed it; 0 keeps it until deleted. key and
// value are copied.
func (s *StateStore) Put(key, value []byte, expiresAt int64) error {
	i, err := s.index()
	if err != nil {
		return err
	}
	if storePut(i, key, value, expiresAt) != 0 {
		return ErrStore
	}
	return nil
}

// Delete removes key in the record's transaction.
func (s *StateStore) Delete(key []byte) error {
	i, err := s.index()
	if err != nil {
		return err
	}
	if storeDelete(i, key) != 0 {
		return ErrStore
	}
	return nil
}

// The results of the host's store functions other than lengths.
const (
	resultNone  = -1
	resultError = -2
)

// StreamTime returns the stream time of the record being processed: its
// input partition's largest record timestamp so far in offset order,
// bounded by PROCESSOR_MAX_FUTURE_SKEW, as Unix milliseconds (ABI.md,
// "Stream time"); ok is false when none is known. A module calls it only
// with stores declared (PROCESSOR_WASM_STORES), from its Func.
func StreamTime() (ms int64, ok bool) {
	ms = streamTime()
	return ms, ms >= 0
}
