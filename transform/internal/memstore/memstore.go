// Package memstore is a transform.Stores in memory, for the tests of the
// stateful built-ins.
package memstore

import (
	"context"
	"time"

	"github.com/streamproc/processor/transform"
)

// Stores holds named stores of one partition, in memory.
type Stores map[string]Store

// Store is one store in memory.
type Store map[string][]byte

// Store returns the named store, created when missing.
func (s Stores) Store(name string) (transform.Store, error) {
	st, ok := s[name]
	if !ok {
		st = Store{}
		s[name] = st
	}
	return st, nil
}

// Context returns ctx carrying s.
func (s Stores) Context(ctx context.Context) context.Context { return transform.WithStores(ctx, s) }

// Get implements transform.Store.
func (s Store) Get(key []byte) ([]byte, bool, error) {
	v, ok := s[string(key)]
	return v, ok, nil
}

// Put implements transform.Store.
func (s Store) Put(key, value []byte, _ time.Time) error {
	s[string(key)] = append([]byte(nil), value...)
	return nil
}

// Delete implements transform.Store.
func (s Store) Delete(key []byte) error {
	delete(s, string(key))
	return nil
}
