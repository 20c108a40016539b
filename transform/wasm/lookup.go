package wasm

import (
	"context"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// Tables: a module with TABLES reads table topics through the host
// function table_lookup (ABI.md, "Tables"). The processor keeps each
// table as it keeps the join transform's (transform.Joiner): restored
// for the assigned input partitions before any of their records runs,
// and kept current while the stream runs, so that a record sees each
// table as this instance has read it when the record is processed.

// JoinTables implements transform.Joiner: the TABLES setting's topics,
// each kept as TABLE_MODE says.
func (t *Transform) JoinTables() []transform.TableRef {
	refs := make([]transform.TableRef, len(t.tables))
	for i, n := range t.tables {
		refs[i] = transform.TableRef{Topic: n, Global: t.global, TableSetting: "TABLES", ModeSetting: "TABLE_MODE"}
	}
	return refs
}

// BindTable implements transform.Joiner: the table of topic, one of
// TABLES, for every instance's lookups. The processor binds every table
// before the first record runs.
func (t *Transform) BindTable(topic string, tb transform.Table) {
	for i, n := range t.tables {
		if n == topic {
			t.bound[i] = tb
		}
	}
}

// hostTableLookup is table_lookup(name_ptr, name_len, key_ptr, key_len,
// buf_ptr, buf_cap) -> i32: the length n of the row of key in the named
// table, written to buf when n <= buf_cap; -1 when the key has no row;
// -2 when the lookup failed (a table not declared in TABLES, or not
// restored), which fails the record with the host's error.
func hostTableLookup(ctx context.Context, mod api.Module, stack []uint64) {
	const fn = "table_lookup"
	hs := hostOf(ctx, fn)
	bufPtr, bufCap := uint32(stack[4]), uint32(stack[5])
	if bufCap > 1<<31-1 {
		hs.hostFault(fn, "a row buffer of %d bytes: at most 2147483647", bufCap)
	}
	name := hs.read(mod, fn, "the table name", uint32(stack[0]), uint32(stack[1]))
	key := hs.read(mod, fn, "the key", uint32(stack[2]), uint32(stack[3]))
	buf := hs.read(mod, fn, "the row buffer", bufPtr, bufCap)
	v, ok, err := hs.lookup(string(name), key)
	switch {
	case err != nil:
		stack[0] = hs.fail(err)
	case !ok:
		stack[0] = resultNone
	case len(v) > 1<<31-1:
		stack[0] = hs.fail(fmt.Errorf("table %s: a row of %d bytes, more than a guest can take", name, len(v)))
	default:
		if len(v) <= len(buf) {
			copy(buf, v)
		}
		stack[0] = uint64(uint32(len(v)))
	}
}

// lookup returns the row of key in table name for the record being
// processed: of the record's partition when co-partitioned. A table the
// processor has not restored yet is transform.Unavailable, as the join's
// is.
func (hs *hostState) lookup(name string, key []byte) ([]byte, bool, error) {
	t := hs.t
	i := -1
	for j, n := range t.tables {
		if n == name {
			i = j
			break
		}
	}
	switch {
	case i < 0:
		return nil, false, &settings.Message{Text: settings.Say(fmt.Sprintf("table %q is not declared: the module may read only the tables of ", name),
			settings.Ref("TABLES"), "="+strings.Join(t.tables, ","))}
	case hs.closing:
		return nil, false, fmt.Errorf("table %s: not reachable from %s (a closed entry's outputs are made from the entry alone)", name, closedExport)
	case hs.rctx == nil:
		return nil, false, fmt.Errorf("table %s: no record is being processed (a table is read only from processor_process)", name)
	case t.bound[i] == nil:
		return nil, false, fmt.Errorf("table %s: no table: the transform runs where the processor keeps no table", name)
	}
	v, ok, err := t.bound[i].Lookup(hs.part, key)
	if err != nil {
		return nil, false, transform.Unavailable(fmt.Errorf("table %s: %w", name, err))
	}
	return v, ok, nil
}
