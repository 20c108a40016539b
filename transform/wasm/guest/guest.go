// Package guest is the Go SDK for writing WebAssembly transforms for the
// processor's wasm transform (ABI version 1, see ../ABI.md). A plugin
// registers one function in init and is built as a WASI reactor:
//
//	package main
//
//	import "github.com/streamproc/processor/transform/wasm/guest"
//
//	func init() { guest.Handle(process) }
//
//	func process(in guest.Record) ([]guest.Record, error) {
//		in.Value = bytes.ToUpper(in.Value)
//		return []guest.Record{in}, nil
//	}
//
//	func main() {} // required, but never called in a reactor
//
//	// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o upper.wasm .
//
// The package implements the ABI's exports (processor_abi_version,
// processor_alloc, processor_process, processor_closed) with
// //go:wasmexport when built for wasip1, and imports the state store
// host functions (processor.store_*) only when a plugin uses a
// StateStore, and processor.table_lookup only when it calls Lookup; on other platforms it compiles
// too, so a plugin's logic can be unit-tested natively by calling its
// function directly (its stores are then maps).
//
// Memory: every input record arrives in one buffer the host wrote into
// guest memory, and the Record the function receives points into it (no
// copies), so its slices and strings are valid only until the function
// returns; keep anything longer with bytes.Clone or strings.Clone.
// Modifying in.Value in place is allowed and is the cheapest way to
// transform a value. The records the function returns are not encoded
// either: the host reads their bytes where they are, after the function
// returns and before the next call, so a function may return the same
// slices (of records, of bytes) on every call, as the examples in
// examples/wasm do to allocate nothing.
//
// Timers and windows: a module registers a ClosedFunc (HandleClosed) and
// puts entries with an expiry into a store named in the wasm
// transform's EMIT_STORES setting; once its partition's stream time
// reaches an entry's expiry, the processor deletes it and writes what the
// ClosedFunc makes of it, in the same transaction: exactly once. See
// examples/wasm/windowcount.
//
// State: Store returns a state store the processor keeps exactly once
// (declared in the wasm transform's STORES setting), whose Get, Put and
// Delete reach the partition of the record being processed; a record's
// writes count only when it succeeds. See StateStore and
// examples/wasm/count.
//
// Tables: Lookup reads the row of a key in a table topic the processor
// keeps as it keeps the join transform's (declared in the wasm
// transform's TABLES setting): the table as this instance has read it
// when the record is processed. See examples/wasm/enrichjoin.
//
// Cost: under the host's deadline (the wasm transform's TIMEOUT) every loop
// iteration and most branches of Go code compiled to WebAssembly cost
// about 25 ns more, so per-record work in few iterations (eight bytes at
// a time, no reflection) is what makes a fast plugin; see ../ABI.md.
package guest

// ABIVersion is the version of the host-guest interface this package
// implements; the host refuses modules that report another.
const ABIVersion = 1

// Record is one Kafka record crossing the boundary.
//
// On input, Key, Value and Headers are the input record's (nil Key or
// Value is a Kafka null), Source tells where it came from, Timestamp is its
// timestamp, and Topic is empty. On output, Topic chooses the destination
// topic ("" is the processor's default output topic);
// Source and Timestamp are ignored: outputs keep the input's timestamp;
// outputs of a ClosedFunc are stamped with their Timestamp (0: the
// closed entry's expiry).
type Record struct {
	Key     []byte
	Value   []byte
	Headers []Header
	Topic   string

	Source    Source
	Timestamp int64 // the input's timestamp, Unix milliseconds
}

// Header is one record header; a nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Source is where the input record was read: the same for every output
// of one input, and across every retry of it, so it is the right key for
// deterministic ids and idempotent side effects.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Func is a plugin's transform: it returns zero (filter), one or many
// records, or an error, which fails the input record in the processor as
// any transform error does. A panic is recovered and reported as an error.
//
// The host bounds what one call may return (../ABI.md): at most 1,048,576
// records and 1,048,576 headers in all, and at most the instance's memory
// limit (the wasm transform's MAX_MEMORY) of topic, key, value and header bytes
// in all, counting bytes that several records share once per record.
// Returning more fails the input record.
type Func func(in Record) ([]Record, error)

var handler Func

// Handle registers fn as the plugin's transform. Call it once, from init:
// a reactor module's main is never run.
func Handle(fn Func) {
	if handler != nil {
		panic("guest: Handle called twice")
	}
	handler = fn
}
