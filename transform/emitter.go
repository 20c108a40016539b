package transform

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Closing is an entry of a store deleted because the partition's stream
// time reached its expiry: what a WindowEmitter turns into its final
// records.
type Closing struct {
	// Store names the store; Topic and Partition are the input's whose
	// partition of the store keeps the entry (behind a repartition hop,
	// the repartition topic's).
	Store, Topic string
	Partition    int32
	// Key and Value are the entry's, as the stage wrote them last.
	Key, Value []byte
	// Expiry is the time the entry was written to expire at, which the
	// stream time has reached.
	Expiry time.Time
}

// WindowEmitter is an optional interface of a Stateful transform that
// emits when entries of its stores close rather than (or as well as)
// when records arrive: a window's final result (aggregate with
// EMIT=close), or any timer at a stream time. The stage writes an entry
// with an expiry (Store.Put's expiresAt): once the partition's stream
// time (StreamTimeOf) reaches it, the processor deletes the entry and, in
// the same Kafka transaction, produces what Closed makes of it, so that
// across aborts, crashes and rebalances every entry is emitted exactly
// once: a transaction that commits has deleted it and written its
// records, one that aborts neither. Entries close in order of (expiry,
// key) within a partition; a bound on a transaction's bytes may delay a
// close to a later transaction, never skip it.
//
// Closed runs in the processor's loop, between the records of a poll, with
// ctx carrying the stream time; it must not use the stores. Its records go
// through the stages after this one (which must keep no state) and are
// written like any output. from names the input record whose lineage
// they carry (processor.source), which the stage keeps with the entry:
// the original input (OriginOf), also behind a repartition hop, where
// the entry's Topic and Partition are the repartition topic's; from's
// Offset is -1 when the stage kept none.
type WindowEmitter interface {
	Stateful
	// EmitsOnClose reports whether store's entries emit when they close.
	EmitsOnClose(store string) bool
	// Closed appends to out the records the closed entry c emits.
	Closed(ctx context.Context, c Closing, out []*kgo.Record) (res []*kgo.Record, from Source, err error)
}

// CloseSetter is an optional interface of a WindowEmitter: the setting
// that makes it emit on close and its value, as the user gave them, for
// a message that refuses the combination (the wasm transform's
// EMIT_STORES). A WindowEmitter without it is taken to emit by EMIT=close,
// as aggregate does.
type CloseSetter interface {
	CloseSetting() (name, value string)
}

// EmitsOnClose reports whether t is a WindowEmitter any of whose stores
// emit when their entries close.
func EmitsOnClose(t Transform) bool {
	w, ok := t.(WindowEmitter)
	if !ok {
		return false
	}
	for _, s := range w.Stores() {
		if w.EmitsOnClose(s) {
			return true
		}
	}
	return false
}
