package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// The host functions a module may import when the transform declares
// state stores (STORES): the "processor" import module of ABI.md, "State
// stores". They are instantiated into the runtime only then, so a module
// without stores that imports them fails the import check at start.

// HostModule is the name of the import module of the host functions.
const HostModule = "processor"

// Results of the host functions that are not a length, as the i32 -1 and
// -2 on the call's stack.
const (
	resultNone  = uint64(^uint32(0)) // -1, store_get: the key has no value; store_index: no such store
	resultError = uint64(^uint32(1)) // -2, the store failed; the host fails the record with its error
)

// hostFunc is one host function: its name, signature and Go code, and
// whether it reads a table (TABLES) rather than a state store (STORES).
type hostFunc struct {
	name            string
	params, results []api.ValueType
	fn              api.GoModuleFunc
	table           bool
}

var hostFuncs = func() []hostFunc {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	return []hostFunc{
		{"store_index", []api.ValueType{i32, i32}, []api.ValueType{i32}, hostStoreIndex, false},
		{"store_get", []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, hostStoreGet, false},
		{"store_put", []api.ValueType{i32, i32, i32, i32, i32, i64}, []api.ValueType{i32}, hostStorePut, false},
		{"store_delete", []api.ValueType{i32, i32, i32}, []api.ValueType{i32}, hostStoreDelete, false},
		{"stream_time", nil, []api.ValueType{i64}, hostStreamTime, false},
		{"table_lookup", []api.ValueType{i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}, hostTableLookup, true},
	}
}()

// instantiateHost instantiates the host functions into rt.
func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(HostModule)
	for _, f := range hostFuncs {
		b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("instantiating the %s host functions: %w", HostModule, err)
	}
	return nil
}

// checkHostImport checks one import of the processor module: a known
// function with its signature, and stores (or tables, for table_lookup)
// declared to use it.
func checkHostImport(f api.FunctionDefinition, stores, tables bool) error {
	_, name, _ := f.Import()
	for _, h := range hostFuncs {
		if h.name != name {
			continue
		}
		if !equalTypes(f.ParamTypes(), h.params) || !equalTypes(f.ResultTypes(), h.results) {
			return fmt.Errorf("its import %s.%s has the wrong signature", HostModule, name)
		}
		if h.table && !tables {
			return errNoTables{name}
		}
		if !h.table && !stores {
			return errNoStores{name}
		}
		return nil
	}
	return fmt.Errorf("it imports %s.%s, which the host does not provide (it provides %s)", HostModule, name, hostFuncNames())
}

func equalTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hostFuncNames() string {
	names := make([]string, len(hostFuncs))
	for i, h := range hostFuncs {
		names[i] = h.name
	}
	return strings.Join(names, ", ")
}

// errNoStores: the module imports a state store function, but the
// transform declares no stores.
type errNoStores struct{ fn string }

func (e errNoStores) Error() string {
	return "it imports " + HostModule + "." + e.fn + ", a state store function, but no stores are declared"
}

// errNoTables: the module imports table_lookup, but the transform
// declares no tables.
type errNoTables struct{ fn string }

func (e errNoTables) Error() string {
	return "it imports " + HostModule + "." + e.fn + ", the table function, but no tables are declared"
}

// parseStores splits and checks the STORES setting: names that can be
// part of a topic name, each once.
func parseStores(v string) ([]string, error) { return parseNames("STORES", v) }

// parseNames splits and checks the store names of setting field.
func parseNames(field, v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "" || len(n) > 200:
			return nil, transform.Invalid(field, v, " (a name is 1 to 200 characters)")
		case strings.IndexFunc(n, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		}) >= 0:
			return nil, transform.Invalid(field, v, fmt.Sprintf(" (%q has a character other than a-z A-Z 0-9 . _ -)", n))
		}
		for _, m := range names {
			if m == n {
				return nil, transform.Invalid(field, v, fmt.Sprintf(" (%q is named twice)", n))
			}
		}
		names = append(names, n)
	}
	return names, nil
}

// ErrBadCall: the guest called a host function with arguments that break
// the ABI (an address or length outside its memory). The guest is stopped
// and its instance discarded.
var ErrBadCall = errors.New("wasm guest made a malformed host call")

// hostState is what the host functions of one instance work with. The
// instance's context carries it (hostKey), so that a host function finds
// it without a lookup by module; one guest call at a time uses it.
type hostState struct {
	t *Transform

	// During a Process call: the record's context, which carries the
	// stores (transform.StoreOf), and each declared store once resolved
	// for this record.
	rctx context.Context
	open []transform.Store

	// The record's writes, applied to the stores only when the record
	// succeeds (commit), so that a record the guest fails, or that traps
	// or times out, changes no state.
	pending pendingWrites

	// err is the first store error of the call: the record fails with it,
	// whatever the guest returns. fault is a malformed call, which stopped
	// the guest.
	err, fault error

	// closing: the call is processor_closed, which may not reach the
	// stores (the processor is deleting their expired entries).
	closing bool

	// part is the input partition of the record being processed: the
	// table partition a co-partitioned table is read from.
	part int32
}

type hostKey struct{}

// hostOf returns the hostState of the instance the host function fn
// runs in. Called outside the host's calls (by a guest's start function,
// say), it panics with ErrBadCall, which traps the guest.
func hostOf(ctx context.Context, fn string) *hostState {
	hs, _ := ctx.Value(hostKey{}).(*hostState)
	if hs == nil {
		panic(fmt.Errorf("%w: %s.%s called outside the host's calls", ErrBadCall, HostModule, fn))
	}
	return hs
}

// begin readies hs for one record of input partition part, whose
// context is ctx.
func (hs *hostState) begin(ctx context.Context, part int32) {
	hs.rctx, hs.err, hs.fault, hs.closing, hs.part = ctx, nil, nil, false, part
	hs.pending.reset()
}

// end forgets the record's context and resolved stores, and drops any
// writes commit did not apply.
func (hs *hostState) end() {
	hs.rctx, hs.closing = nil, false
	clear(hs.open)
	hs.pending.reset()
}

// commit applies the record's writes to its stores, in the order the
// guest made them.
func (hs *hostState) commit() error {
	for i := range hs.pending.ops {
		op := &hs.pending.ops[i]
		st, err := hs.store(op.store)
		if err != nil {
			return err
		}
		key := hs.pending.key(op)
		if op.del {
			err = st.Delete(key)
		} else {
			var exp time.Time
			if op.expires != 0 {
				exp = time.UnixMilli(op.expires)
			}
			err = st.Put(key, hs.pending.value(op), exp)
		}
		if err != nil {
			return hs.storeErr(op.store, "writing", err)
		}
	}
	return nil
}

// store returns declared store i for the record being processed.
func (hs *hostState) store(i int32) (transform.Store, error) {
	names := hs.t.stores
	if i < 0 || int(i) >= len(names) {
		return nil, &settings.Message{Text: settings.Say(fmt.Sprintf("state store index %d: the module has %d stores (", i, len(names)),
			settings.Ref("STORES"), "="+strings.Join(names, ",")+")")}
	}
	if hs.closing {
		return nil, fmt.Errorf("state store %q: not reachable from %s (a closed entry's outputs are made from the entry alone)", names[i], closedExport)
	}
	if hs.rctx == nil {
		return nil, fmt.Errorf("state store %q: no record is being processed (a store is reached only from processor_process)", names[i])
	}
	if st := hs.open[i]; st != nil {
		return st, nil
	}
	st, err := transform.StoreOf(hs.rctx, names[i])
	if err != nil {
		return nil, fmt.Errorf("state store %q: %w", names[i], err)
	}
	hs.open[i] = st
	return st, nil
}

func (hs *hostState) storeErr(i int32, doing string, err error) error {
	return fmt.Errorf("state store %q: %s: %w", hs.t.stores[i], doing, err)
}

// fail records a store error for the record and returns resultError for
// the guest.
func (hs *hostState) fail(err error) uint64 {
	if hs.err == nil {
		hs.err = err
	}
	return resultError
}

// hostFault stops the guest: a malformed call (an address outside its
// memory) is a bug in the guest, and its state is not to be trusted.
// wazero recovers the panic and fails the call, which then reports
// fault.
func (hs *hostState) hostFault(fn string, format string, args ...any) {
	err := fmt.Errorf("%w: %s.%s: %s", ErrBadCall, HostModule, fn, fmt.Sprintf(format, args...))
	if hs != nil && hs.fault == nil {
		hs.fault = err
	}
	panic(err)
}

// read returns n bytes of guest memory at ptr, or stops the guest when
// they are not all inside it. The bytes are guest memory itself: valid
// until the guest runs again.
func (hs *hostState) read(mod api.Module, fn, what string, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		hs.hostFault(fn, "%s (address %d, %d bytes) is outside the guest's %d bytes of memory", what, ptr, n, mod.Memory().Size())
	}
	return b
}

// hostStoreIndex is store_index(name_ptr, name_len) -> i32: the index of
// the named store in STORES, or -1.
func hostStoreIndex(ctx context.Context, mod api.Module, stack []uint64) {
	hs := hostOf(ctx, "store_index")
	name := hs.read(mod, "store_index", "the name", uint32(stack[0]), uint32(stack[1]))
	stack[0] = resultNone
	for i, n := range hs.t.stores {
		if n == string(name) {
			stack[0] = uint64(i)
			break
		}
	}
}

// hostStoreGet is store_get(store, key_ptr, key_len, buf_ptr, buf_cap) ->
// i32: the value's length n, written to buf when n <= buf_cap; -1 when
// the key has none; -2 on a store error.
func hostStoreGet(ctx context.Context, mod api.Module, stack []uint64) {
	hs := hostOf(ctx, "store_get")
	i, bufPtr, bufCap := int32(stack[0]), uint32(stack[3]), uint32(stack[4])
	if bufCap > 1<<31-1 {
		hs.hostFault("store_get", "a value buffer of %d bytes: at most 2147483647", bufCap)
	}
	key := hs.read(mod, "store_get", "the key", uint32(stack[1]), uint32(stack[2]))
	buf := hs.read(mod, "store_get", "the value buffer", bufPtr, bufCap)
	st, err := hs.store(i)
	if err != nil {
		stack[0] = hs.fail(err)
		return
	}
	v, ok, found := hs.pending.get(i, key)
	if !found {
		if v, ok, err = st.Get(key); err != nil {
			stack[0] = hs.fail(hs.storeErr(i, "reading", err))
			return
		}
	}
	if !ok {
		stack[0] = resultNone
		return
	}
	if len(v) > 1<<31-1 {
		stack[0] = hs.fail(hs.storeErr(i, "reading", fmt.Errorf("a value of %d bytes, more than a guest can take", len(v))))
		return
	}
	if len(v) <= len(buf) {
		copy(buf, v)
	}
	stack[0] = uint64(uint32(len(v)))
}

// hostStorePut is store_put(store, key_ptr, key_len, value_ptr,
// value_len, expires_at) -> i32: 0, or -2 on a store error. expires_at is
// record time in Unix milliseconds, 0 for never.
func hostStorePut(ctx context.Context, mod api.Module, stack []uint64) {
	hs := hostOf(ctx, "store_put")
	i := int32(stack[0])
	key := hs.read(mod, "store_put", "the key", uint32(stack[1]), uint32(stack[2]))
	value := hs.read(mod, "store_put", "the value", uint32(stack[3]), uint32(stack[4]))
	if _, err := hs.store(i); err != nil {
		stack[0] = hs.fail(err)
		return
	}
	if err := hs.pending.add(i, key, value, int64(stack[5]), false, hs.t.maxBytes); err != nil {
		stack[0] = hs.fail(hs.storeErr(i, "writing", err))
		return
	}
	stack[0] = 0
}

// hostStoreDelete is store_delete(store, key_ptr, key_len) -> i32: 0, or
// -2 on a store error.
func hostStoreDelete(ctx context.Context, mod api.Module, stack []uint64) {
	hs := hostOf(ctx, "store_delete")
	i := int32(stack[0])
	key := hs.read(mod, "store_delete", "the key", uint32(stack[1]), uint32(stack[2]))
	if _, err := hs.store(i); err != nil {
		stack[0] = hs.fail(err)
		return
	}
	if err := hs.pending.add(i, key, nil, 0, true, hs.t.maxBytes); err != nil {
		stack[0] = hs.fail(hs.storeErr(i, "deleting", err))
		return
	}
	stack[0] = 0
}

// pendingWrites are one record's writes, in order, with their bytes in one
// reused buffer. A read looks them up first (read your writes): linearly
// while there are few, through an index past indexFrom.
type pendingWrites struct {
	ops   []pendingOp
	bytes []byte
	index map[pendingKey]int // the last op of each key, once len(ops) > indexFrom
}

type pendingOp struct {
	store           int32
	del             bool
	off, klen, vlen uint32
	expires         int64
}

type pendingKey struct {
	store int32
	key   string
}

const indexFrom = 16

func (p *pendingWrites) reset() {
	p.ops, p.bytes = p.ops[:0], p.bytes[:0]
	if p.index != nil {
		clear(p.index)
	}
}

func (p *pendingWrites) key(op *pendingOp) []byte {
	return p.bytes[op.off : op.off+op.klen : op.off+op.klen]
}

func (p *pendingWrites) value(op *pendingOp) []byte {
	s := op.off + op.klen
	return p.bytes[s : s+op.vlen : s+op.vlen]
}

// add copies one write. The bytes of one record's writes are limited to
// limit (the instance's memory limit), so that a guest looping over Put
// cannot make the host hold more than it could.
func (p *pendingWrites) add(store int32, key, value []byte, expires int64, del bool, limit uint64) error {
	limit = min(limit, 1<<32-1) // offsets are 32 bits
	if uint64(len(p.bytes))+uint64(len(key))+uint64(len(value)) > limit {
		return &settings.Message{Text: settings.Say(fmt.Sprintf("one record's writes would hold more than %d bytes, the instance's memory limit (", limit),
			settings.Ref("MAX_MEMORY"), ")")}
	}
	op := pendingOp{store: store, del: del, off: uint32(len(p.bytes)), klen: uint32(len(key)), vlen: uint32(len(value)), expires: expires}
	p.bytes = append(append(p.bytes, key...), value...)
	p.ops = append(p.ops, op)
	switch n := len(p.ops); {
	case n == indexFrom+1:
		if p.index == nil {
			p.index = make(map[pendingKey]int, 2*indexFrom)
		}
		for i := range p.ops {
			p.index[pendingKey{p.ops[i].store, string(p.key(&p.ops[i]))}] = i
		}
	case n > indexFrom+1:
		p.index[pendingKey{store, string(key)}] = n - 1
	}
	return nil
}

// get returns the record's last write of key: its value and whether it
// is a Put (found), or found false when the record did not write it.
func (p *pendingWrites) get(store int32, key []byte) (value []byte, ok, found bool) {
	i := -1
	if len(p.ops) > indexFrom {
		if j, hit := p.index[pendingKey{store, string(key)}]; hit {
			i = j
		}
	} else {
		for j := len(p.ops) - 1; j >= 0; j-- {
			if op := &p.ops[j]; op.store == store && string(p.key(op)) == string(key) {
				i = j
				break
			}
		}
	}
	if i < 0 {
		return nil, false, false
	}
	op := &p.ops[i]
	if op.del {
		return nil, false, true
	}
	return p.value(op), true, true
}
