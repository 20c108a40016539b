package guest

// Closing is a state store entry that closed: the module put it with an
// expiry (StateStore.Put's expiresAt) into a store named in the wasm
// transform's EMIT_STORES setting, and its partition's stream time has
// reached the expiry. The processor deletes it and writes the records the
// ClosedFunc makes of it in the same Kafka transaction, so each entry
// emits exactly once, across aborts, crashes and rebalances.
//
// Key and Value point into the host's input buffer, as a Record's do:
// valid only until the function returns.
type Closing struct {
	// Store is the store's name.
	Store string
	// Key and Value are the entry's, as the module put them last.
	Key, Value []byte
	// Expiry is the entry's expiry, Unix milliseconds.
	Expiry int64
	// StreamTime is the partition's stream time that reached the expiry,
	// Unix milliseconds.
	StreamTime int64
	// Source names the entry's input topic and partition; its Offset is
	// -1 (an entry is not one input's).
	Source Source
}

// ClosedFunc makes the records a closed entry emits: zero, one or many
// (a Topic routes them, as for Func), and lineage, the offset of the
// input record of the entry's partition whose lineage (the
// processor.source header) they carry, or -1 for none; a module keeps it
// with the entry, e.g. the offset of the last input counted into a
// window. An output's Timestamp is its timestamp (0: the entry's
// Expiry; a negative one is an error). An error or a panic fails the
// close as a Func's fails a record: the processor's policy for transform
// errors applies to the entry (with PROCESSOR_ON_ERROR=dlq, the entry
// is dead-lettered and deleted).
//
// It runs between records, from the processor's loop: the stores are not
// reachable from it (their methods return ErrStore, and the close fails);
// StreamTime works.
type ClosedFunc func(c Closing) (out []Record, lineage int64, err error)

var closedHandler ClosedFunc

// HandleClosed registers fn as what the module's entries emit when they
// close. Call it once, from init, beside Handle. The stores that emit
// are those named in the wasm transform's EMIT_STORES setting; a module
// loaded with it and without a ClosedFunc fails each close.
func HandleClosed(fn ClosedFunc) {
	if closedHandler != nil {
		panic("guest: HandleClosed called twice")
	}
	closedHandler = fn
}
