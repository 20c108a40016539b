package transform

import (
	"context"
	"errors"
	"time"
)

// Stateful is an optional interface of a transform that keeps keyed state
// in stores the processor owns (the aggregate and dedupe built-ins): the
// stores are partitioned like the input, written inside the Kafka
// transaction (each through a compacted changelog topic,
// <group>-<store>-changelog) and restored on assignment, so the state is
// exactly once across aborts, crashes and rebalances. A Stateful
// transform must also be Ordered, so that each key's records run in order.
// Process reaches its stores with StoreOf.
type Stateful interface {
	Ordered
	// Stores names the stores the transform uses: unique in the chain,
	// each a valid part of a topic name ([a-zA-Z0-9._-]).
	Stores() []string
}

// KeyScoped is an optional interface of a Stateful transform that says
// whether every store key it uses follows from the record's key alone
// (aggregate and dedupe without BY): then two records with different keys
// never touch the same store key. PROCESSOR_ORDERING=key keeps only each
// key's records in order and runs records of different keys at once, so
// it is exact only for stateful stages that are KeyScoped and see the
// key as it arrived (no stage before them may change it); the processor
// refuses any other stateful chain under key ordering (Chain.KeyOrderConflict).
// A Stateful transform without the method is taken not to be.
type KeyScoped interface {
	KeyScoped() bool
}

// StoresOf returns the stores t declares (Stateful), or nil.
func StoresOf(t Transform) []string {
	if s, ok := t.(Stateful); ok {
		return s.Stores()
	}
	return nil
}

// Store is one partition of one store as the open transaction sees it:
// the committed state overlaid with the transaction's own writes, which
// nothing else sees before the transaction commits. The partition is the
// input record's. Its methods are safe for concurrent use with different
// keys.
type Store interface {
	// Get returns the value of key, or ok false when it has none (or it
	// expired). The value must not be modified.
	Get(key []byte) (value []byte, ok bool, err error)
	// Put sets key to value; a non-zero expiresAt, in record time, lets
	// the processor delete the entry once the partition's record time
	// passed it. key and value are copied.
	Put(key, value []byte, expiresAt time.Time) error
	// Delete removes key.
	Delete(key []byte) error
}

// Stores gives the stores of the record being processed; the processor
// puts one in the context of Process (WithStores).
type Stores interface {
	// Store returns the named store's partition of the record being
	// processed, in the open transaction.
	Store(name string) (Store, error)
}

// ErrNoStores is returned by StoreOf when ctx carries no stores: the
// transform runs outside a processor that keeps state (or without being
// Stateful).
var ErrNoStores = errors.New("no state stores: the transform runs where the processor keeps no state")

type storesKey struct{}

// WithStores returns ctx carrying s, for StoreOf.
func WithStores(ctx context.Context, s Stores) context.Context {
	return context.WithValue(ctx, storesKey{}, s)
}

// StoreOf returns the named store for the record ctx's Process call runs,
// in the open transaction. It allocates nothing.
func StoreOf(ctx context.Context, name string) (Store, error) {
	s, ok := ctx.Value(storesKey{}).(Stores)
	if !ok || s == nil {
		return nil, ErrNoStores
	}
	return s.Store(name)
}
