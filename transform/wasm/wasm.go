// Package wasm registers the "wasm" transform, which runs every record
// through a WebAssembly module loaded at start from its MODULE setting,
// sandboxed by wazero (pure Go, no cgo).
//
// The module speaks ABI version 1 (ABI.md beside this file): the host
// writes one length-prefixed input buffer (key, value, headers, source
// topic, partition, offset, timestamp) into guest memory that the guest's
// processor_alloc handed out, calls processor_process once, and reads one
// output buffer holding zero or more records (key, value, headers,
// optional topic) or an error message. Go plugins use the SDK in
// transform/wasm/guest and build with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared
//
// The module is compiled once, at start; instances are pooled and reused
// record after record, never instantiated per record. Each instance gets a
// memory limit (MAX_MEMORY), each record a deadline (TIMEOUT) that stops even a guest in an infinite loop.
// What one call may hand back is bounded before anything is copied: at
// most 2^20 records, 2^20 headers and the memory limit's worth of bytes
// in all, however many of them point at the same guest memory, and at
// most the chain's limit on one record's output bytes
// (see transform.MaxOutputBytes). WebAssembly
// reference types are off, and a module's table is limited, so a guest
// cannot make the host allocate tables outside its memory limit either.
// Guests get no filesystem, no network, no arguments or environment, a
// deterministic random source, and, unless ALLOW_CLOCK is
// true, a fake clock (wazero's default: wall time starts at 2022-01-01 and
// both clocks advance 1ms per reading; sleeping returns at once).
//
// With STORES the module may import the host functions of the processor
// import module (store_index, store_get, store_put, store_delete), which
// reach the state stores of the record being processed; the transform is
// then stateful (transform.Stateful) and ordered. A record's writes apply
// only when it succeeds, and a store error fails it; a host call with an
// address outside guest memory stops the guest (ErrBadCall). The stores
// named in EMIT_STORES emit when an entry expires: the processor deletes
// it and writes what the module's processor_closed makes of it in the
// same transaction (transform.WindowEmitter), a timer or a window's
// final result that is emitted exactly once.
//
// With TABLES the module may import table_lookup, which reads the row of
// a key in a table topic the processor keeps as it keeps the join
// transform's (transform.Joiner; lookup.go): a record sees each table as
// this instance has read it when the record is processed.
//
// A trap, an exit, a deadline, or output that does not follow the ABI is
// a transform error for the record; the instance involved is discarded
// and a fresh one serves the next record. An error the guest returns is a
// transform error too, but the instance is kept.
package wasm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/bytesize"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

func init() {
	transform.Register("wasm", transform.Typed("runs every record through a sandboxed WebAssembly module (MODULE)", New))
}

// ABIVersion is the host-guest interface version this host speaks; a
// module whose processor_abi_version returns another is refused at start.
const ABIVersion = 1

// Settings are the wasm transform's settings, one set per chain entry.
type Settings struct {
	// Module is the path of the .wasm file.
	Module string `setting:"MODULE" required:"true" doc:"the WebAssembly module every record runs through" form:"the path of a WebAssembly module implementing the processor's wasm ABI version 1, e.g. bin/plugins/uppercase.wasm"`
	// MaxMemory caps each instance's linear memory. A guest that grows
	// past it fails the record (a Go guest exits with "out of memory").
	// It also caps the bytes one call's outputs may hold in all (topics,
	// keys, values, headers), counting bytes that several outputs share
	// once per output; more fails the record as malformed output.
	MaxMemory bytesize.Size `setting:"MAX_MEMORY" default:"64MiB" doc:"the cap on each instance's memory and on one call's output bytes" form:"a size from 1MiB to 4GiB such as 64MiB, 512KiB or 1GiB (a plain number is bytes)"`
	// Timeout bounds the guest's time per record; a guest still running
	// then is stopped and the record fails. 0 turns the deadline off, and
	// with it the checks that wazero compiles into every loop and branch of
	// the guest to make it stoppable, which roughly halves the cost of a
	// call into a Go guest; a guest that never returns then hangs the
	// processor until /healthz reports it stuck. Only for trusted modules.
	Timeout time.Duration `setting:"TIMEOUT" default:"100ms" doc:"the guest's deadline per record; 0 turns it off (trusted modules only)" form:"a Go duration from 1ms to 1m such as 100ms, or 0 for no deadline (trusted modules only)"`
	// AllowClock gives the guest the real wall and monotonic clocks
	// instead of wazero's fake ones. Output that depends on the clock
	// differs between the attempts of an aborted and retried transaction.
	AllowClock bool `setting:"ALLOW_CLOCK" default:"false" doc:"give the guest the real clocks instead of fake ones" form:"true or false"`
	// Stores names the state stores the module uses, through the host
	// functions of the processor import module (ABI.md, "State stores").
	// With stores the transform is stateful (transform.Stateful) and
	// ordered, and the processor keeps the stores exactly once like those
	// of aggregate and dedupe; unset, the module may not import them.
	Stores string `setting:"STORES" doc:"the state stores the module uses (its processor.store_* imports), making the transform stateful; unset, none" form:"comma-separated distinct store names of a-z A-Z 0-9 . _ - such as counts,seen (each unique in the chain; a changelog is <group>-<store>-changelog)"`
	// EmitStores names the stores, of STORES, whose entries emit when
	// they close: the module's processor_closed export makes the records
	// (transform.WindowEmitter; ABI.md, "Emitting when an entry closes").
	EmitStores string `setting:"EMIT_STORES" doc:"the stores (of STORES) whose entries emit when they expire: once the stream time reaches an entry's expiry, the processor deletes it and writes the records the module's processor_closed makes of it, in the same transaction; unset, none" form:"comma-separated names from STORES such as windows"`
	// StateByKey is the module's promise that every store key it uses
	// follows from the record's key alone (transform.KeyScoped), which
	// PROCESSOR_ORDERING=key needs: it runs records of different keys at
	// once, and two of them writing one store key could lose an update.
	StateByKey bool `setting:"STATE_BY_KEY" default:"false" doc:"the module keeps state only under keys that follow from the record key, so that PROCESSOR_ORDERING=key may run it; unset, key ordering is refused for it" form:"true or false"`
	// Tables names the table topics the module reads with the
	// processor.table_lookup host function (ABI.md, "Tables"), kept by the
	// processor as the join transform's table is (docs/joins.md).
	Tables string `setting:"TABLES" doc:"the table topics the module reads (its processor.table_lookup import), each kept locally and current as the join transform's table is; unset, none" form:"comma-separated distinct topic names such as customers,products"`
	// TableMode is how every table of TABLES is kept, as the join's MODE.
	TableMode string `setting:"TABLE_MODE" default:"co_partitioned" doc:"co_partitioned: partition p of each table is read by the records of input partition p (same partition count, same partitioner and key); global: every instance keeps every table whole" form:"co_partitioned or global"`
}

// Errors a record can fail with, for errors.Is. The message names the
// cause in more detail.
var (
	// ErrTimeout: the call ran past the TIMEOUT setting and was stopped.
	ErrTimeout = errors.New("wasm guest exceeded its deadline")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack
	// overflow) or exited (a Go guest's fatal error or unrecovered panic
	// outside the SDK, running out of memory).
	ErrTrap = errors.New("wasm guest trapped")
	// ErrBadOutput: the guest's output does not follow the ABI.
	ErrBadOutput = errors.New("wasm guest returned malformed output")
	// ErrGuest: the guest reported an error for the record (its message
	// follows); panics in an SDK plugin's function end up here too.
	ErrGuest = errors.New("wasm guest failed")
)

// Limits on what the host accepts and at start.
const (
	minMemory    = 1 << 20
	maxMemory    = 4 << 30
	pageSize     = 64 << 10
	minTimeout   = time.Millisecond
	maxTimeout   = time.Minute
	startTimeout = 10 * time.Second // instantiation, including the guest's init
)

// Transform runs records through pooled instances of one compiled module:
// wazero compiles the module to machine code once, when New loads it, and
// keeps that code in memory for every instance. It is safe for concurrent
// use; each concurrent caller gets an instance of its own. Close releases
// the runtime.
type Transform struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	modCfg   wazero.ModuleConfig
	timeout  time.Duration
	maxBytes uint64 // the memory limit: what one call's outputs may hold
	// maxRecord is the chain's limit on one record's outputs
	// (LimitOutputBytes).
	maxRecord atomic.Int64
	// stores are the STORES setting's names; the host functions address
	// them by index into it.
	stores []string
	emit   []string // EmitStores
	byKey  bool     // StateByKey
	// tables are the TABLES setting's topics, read whole (global) or by
	// the record's partition; bound are their tables, by index, once the
	// processor binds them.
	tables []string
	global bool
	bound  []transform.Table

	mu     sync.Mutex
	idle   []*instance
	closed bool
}

// maxIdle is how many idle instances the pool keeps; the pipeline uses one.
const maxIdle = 4

// Compile-time checks of the optional interfaces Transform implements.
var (
	_ transform.Timed         = (*Transform)(nil)
	_ transform.OutputLimiter = (*Transform)(nil)
	_ io.Closer               = (*Transform)(nil)
	_ transform.Stateful      = (*Transform)(nil)
	_ transform.Joiner        = (*Transform)(nil)
)

// coreFeatures are the WebAssembly features a module may use: 2.0 without
// reference types. Reference types would let a guest make the host
// allocate without bound, outside its memory limit: table.grow and
// table.fill on tables of any size, and any number of tables. The ABI
// needs none of it, nor do Go guests. They do need bulk memory
// (memory.copy, memory.fill), sign extension and non-trapping
// float-to-int conversion, which like SIMD and multi-value (kept for
// guests compiled by LLVM) work within the instance's own memory and
// stack. Bulk memory's table.copy and table.init stay within a table's
// declared size.
const coreFeatures = api.CoreFeaturesV2 &^ api.CoreFeatureReferenceTypes

// bad is the error refusing value for setting name, wanting want.
func bad(name, value, want string) error {
	return &settings.Error{Field: name, Value: value, Want: settings.Say(want)}
}

// New loads, checks and compiles the module, and instantiates one instance
// so that a module that cannot start fails at start, not on the first
// record. Every error names the setting at fault.
func New(s *Settings) (transform.Transform, error) {
	return newTransform(s, newCache)
}

// newTransform is New with an optional shared compilation cache (tests use
// one to compile each guest once).
func newTransform(s *Settings, cache wazero.CompilationCache) (*Transform, error) {
	bin, err := readModule(s)
	if err != nil {
		return nil, err
	}

	ctx := context.Background()
	pages := uint32((uint64(s.MaxMemory) + pageSize - 1) / pageSize)
	rc := wazero.NewRuntimeConfig().
		WithCoreFeatures(coreFeatures).
		WithCloseOnContextDone(s.Timeout > 0). // lets a deadline stop a runaway loop
		WithMemoryLimitPages(pages)
	if cache != nil {
		rc = rc.WithCompilationCache(cache)
	}
	t := &Transform{
		rt:       wazero.NewRuntimeWithConfig(ctx, rc),
		timeout:  s.Timeout,
		maxBytes: uint64(pages) * pageSize,
	}
	t.maxRecord.Store(transform.DefaultMaxOutputBytes)
	t.stores, _ = parseStores(s.Stores) // checked by readModule
	t.emit, _ = parseEmitStores(s.EmitStores, t.stores)
	t.byKey = s.StateByKey
	t.tables, _ = parseNames("TABLES", s.Tables)
	t.global, t.bound = s.TableMode == "global", make([]transform.Table, len(t.tables))
	fail := func(err error) (*Transform, error) {
		_ = t.rt.Close(ctx)
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, t.rt); err != nil {
		return fail(fmt.Errorf("instantiating WASI: %w", err))
	}
	if len(t.stores) > 0 || len(t.tables) > 0 {
		if err := instantiateHost(ctx, t.rt); err != nil {
			return fail(err)
		}
	}
	if err := t.compile(ctx, s, bin); err != nil {
		return fail(err)
	}
	t.modCfg = wazero.NewModuleConfig().
		WithName(""). // anonymous, so one compiled module instantiates many times
		WithStartFunctions("_initialize").
		WithStdout(io.Discard)
	if s.AllowClock {
		t.modCfg = t.modCfg.WithSysWalltime().WithSysNanotime()
	}

	// One instance now: a module that cannot start is a configuration
	// error, and the first record does not pay for instantiation.
	inst, err := t.instantiate()
	if err != nil {
		if strings.Contains(err.Error(), "memory") {
			return fail(transform.Invalid("MAX_MEMORY", s.MaxMemory.String(), ", enough for the module to start ("+firstLine(err)+")"))
		}
		return fail(bad("MODULE", s.Module, "a module that starts: "+firstLine(err)))
	}
	if v, err := inst.abiVersion(); err != nil || v != ABIVersion {
		inst.close()
		if err != nil {
			return fail(bad("MODULE", s.Module, "a module whose processor_abi_version answers: "+firstLine(err)))
		}
		return fail(bad("MODULE", s.Module, fmt.Sprintf("a module implementing the processor's wasm ABI version %d (it implements version %d)", ABIVersion, v)))
	}
	t.idle = append(t.idle, inst)
	return t, nil
}

// LimitOutputBytes sets the most that the outputs of one record may hold,
// counted as transform.Size counts them; until the chain calls it, it is
// transform.DefaultMaxOutputBytes. It implements transform.OutputLimiter:
// the host checks it, as it checks MAX_MEMORY, from the guest's output
// table before it copies anything out of guest memory, and fails the
// record with a *transform.OutputLimitError. The instance is kept: its
// output followed the ABI.
func (t *Transform) LimitOutputBytes(n int64) { t.maxRecord.Store(n) }

// Ordered reports whether the module uses state stores (STORES) or
// tables (TABLES): a stateful transform must see each key's records in
// order, and a partition's records read a table in offset order, so that
// a later record never sees an older table than an earlier one did.
// Without either it returns false, and the transform runs as any stateless one.
// It implements transform.Ordered.
func (t *Transform) Ordered() bool { return len(t.stores) > 0 || len(t.tables) > 0 }

// Stores returns the STORES setting's names, or nil when it is unset, so
// that a module without stores makes no chain stateful. It implements
// transform.Stateful: the processor then keeps each store exactly once,
// partitioned like the input, as it keeps those of aggregate and dedupe.
func (t *Transform) Stores() []string { return slices.Clone(t.stores) }

// KeyScoped returns the STATE_BY_KEY setting: see transform.KeyScoped.
func (t *Transform) KeyScoped() bool { return t.byKey }

// GroupKey returns the record's key, what a module with STATE_BY_KEY
// keeps its state by: behind a stage that may change the key, the
// processor repartitions by it (see transform.GroupKeyer).
func (t *Transform) GroupKey(_ context.Context, r *kgo.Record) ([]byte, error) { return r.Key, nil }

// PartitionedByKey reports whether the module's state stays partitioned
// like the input: a module without STATE_BY_KEY names no group key, so
// no repartition can follow it, and it keeps its state by the input's
// partitions as it always did (see transform.KeyPartitioned).
func (t *Transform) PartitionedByKey() bool { return !t.byKey }

// CallTimeout returns the TIMEOUT setting, the longest one Process
// call may run the guest for, or 0 when the deadline is off. It
// implements transform.Timed. A call takes longer than this by the host's
// own work around the guest (writing the input, copying the outputs) and,
// when it needs a new instance (after a trap, a timeout or malformed
// output, or for a concurrent caller), by instantiating one: a few
// milliseconds for a Go guest, at most 10s for any.
func (t *Transform) CallTimeout() time.Duration { return t.timeout }

// Process runs rec through one pooled instance. The first output reuses
// rec; others are new records with rec's timestamp. Output bytes equal to
// the input's (an unchanged key, header values) share the input's memory.
// On error rec is left as it was.
//
// ctx's cancellation is not passed on to the guest: a call is bounded by
// the deadline, and stopping a guest at shutdown would fail a record that
// the processor could otherwise commit. With STORES, the guest's host
// calls reach the record's stores through ctx (transform.StoreOf); its
// writes reach them only when the record succeeds, so a record that
// fails, in the guest or the host, changes no state.
func (t *Transform) Process(ctx context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	inst, err := t.get()
	if err != nil {
		return out, err
	}
	res, err := inst.process(ctx, src, rec, out)
	if inst.broken {
		inst.close()
	} else {
		t.put(inst)
	}
	if err != nil {
		return out, err
	}
	return res, nil
}

// get takes an idle instance or instantiates a new one (after a trap, or
// when callers run concurrently).
func (t *Transform) get() (*instance, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("wasm transform is closed")
	}
	if n := len(t.idle); n > 0 {
		inst := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		return inst, nil
	}
	t.mu.Unlock()
	inst, err := t.instantiate()
	if err != nil {
		return nil, fmt.Errorf("instantiating a replacement wasm instance: %w", err)
	}
	return inst, nil
}

// put returns inst to the pool, or closes it when the pool is full or
// closed.
func (t *Transform) put(inst *instance) {
	t.mu.Lock()
	if !t.closed && len(t.idle) < maxIdle {
		t.idle = append(t.idle, inst)
		inst = nil
	}
	t.mu.Unlock()
	if inst != nil {
		inst.close()
	}
}

// Close closes the idle instances and the runtime, which also stops
// instances still in use. It implements io.Closer.
func (t *Transform) Close() error {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.closed = nil, true
	t.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
	if err := t.rt.Close(context.Background()); err != nil {
		return fmt.Errorf("closing the wasm runtime: %w", err)
	}
	return nil
}
