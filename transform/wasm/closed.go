package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// Entries that emit when they close (ABI.md, "Emitting when an entry
// closes"): a store named in EMIT_STORES emits through the module's
// processor_closed export. The module puts an entry with an expiry
// (store_put's expires_at); once its partition's stream time reaches
// the expiry, the processor deletes the entry and, in the same Kafka
// transaction, writes the records processor_closed makes of it
// (transform.WindowEmitter), so each entry emits exactly once.

// The closed export and its layouts.
const (
	closedExport     = "processor_closed"
	closingHeadSize  = 56 // the fixed start of a closing input
	closedResultSize = 24 // a result, then the lineage offset
)

var (
	_ transform.WindowEmitter = (*Transform)(nil)
	_ transform.CloseSetter   = (*Transform)(nil)
)

// parseEmitStores checks the EMIT_STORES setting v: names of stores in
// STORES (stores), each once.
func parseEmitStores(v string, stores []string) ([]string, error) {
	names, err := parseNames("EMIT_STORES", v)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if !slices.Contains(stores, n) {
			return nil, transform.Invalid("EMIT_STORES", v, fmt.Sprintf(" (%q is not one of the STORES setting's %q)", n, strings.Join(stores, ",")))
		}
	}
	return names, nil
}

// checkClosedExport checks the module's processor_closed: its signature
// when it exports one, and that it does when a store emits (emit).
func checkClosedExport(m wazero.CompiledModule, emit bool) error {
	f, ok := m.ExportedFunctions()[closedExport]
	if !ok {
		if emit {
			return fmt.Errorf("it does not export %s, which the stores of the EMIT_STORES setting emit through", closedExport)
		}
		return nil
	}
	i32 := api.ValueTypeI32
	if !equalTypes(f.ParamTypes(), []api.ValueType{i32, i32}) || !equalTypes(f.ResultTypes(), []api.ValueType{i32}) {
		return fmt.Errorf("its %s has the wrong signature", closedExport)
	}
	return nil
}

// CloseSetting returns EMIT_STORES and its value: the setting that makes
// the transform emit on close. It implements transform.CloseSetter.
func (t *Transform) CloseSetting() (name, value string) {
	return "EMIT_STORES", strings.Join(t.emit, ",")
}

// EmitsOnClose reports whether store is named in the EMIT_STORES
// setting. It implements transform.WindowEmitter.
func (t *Transform) EmitsOnClose(store string) bool { return slices.Contains(t.emit, store) }

// Closed runs the closed entry c through the module's processor_closed,
// in one pooled instance under the TIMEOUT deadline, and appends the
// records it returns; offset is the input offset the guest names for
// their lineage, -1 for none. It implements transform.WindowEmitter.
// Store calls fail during it (the processor is deleting entries then);
// stream_time answers. A guest error, a trap, the deadline or malformed
// output fail the close as they fail a record (the processor's policy
// for transform errors then applies to the entry), and discard the
// instance as they do for a record.
func (t *Transform) Closed(ctx context.Context, c transform.Closing, out []*kgo.Record) ([]*kgo.Record, record.Source, error) {
	from := record.Source{Topic: c.Topic, Partition: c.Partition, Offset: -1}
	if !t.EmitsOnClose(c.Store) {
		return out, from, fmt.Errorf("wasm: store %q does not emit when its entries close (the EMIT_STORES setting is %q)", c.Store, strings.Join(t.emit, ","))
	}
	inst, err := t.get()
	if err != nil {
		return out, from, err
	}
	res, offset, err := inst.closed(ctx, c, out)
	if inst.broken {
		inst.close()
	} else {
		t.put(inst)
	}
	if err != nil {
		return out, from, fmt.Errorf("closing an entry of store %q: %w", c.Store, err)
	}
	// The guest names its input by offset, in the closed entry's input
	// partition (no hop comes before a plugin that emits on close).
	from.Offset = offset
	return res, from, nil
}

// closed writes the closing input of c into the guest, calls
// processor_closed and reads its outputs.
func (inst *instance) closed(ctx context.Context, c transform.Closing, out []*kgo.Record) ([]*kgo.Record, int64, error) {
	n := uint64(closingHeadSize + len(c.Store) + len(c.Topic) + len(c.Key) + len(c.Value))
	if n > math.MaxInt32 {
		return out, -1, fmt.Errorf("the closed entry needs %d bytes of guest memory, more than the ABI's 2GiB", n)
	}
	stream, ok := transform.StreamMillisOf(ctx)
	if !ok {
		stream = -1
	}
	hs := inst.host
	hs.begin(ctx, -1)
	hs.closing = true
	defer hs.end()
	inst.arm()
	err := inst.runClosed(c, stream, uint32(n))
	if derr := inst.disarm(); err == nil {
		err = derr
	}
	if err != nil {
		return out, -1, err
	}
	if hs.err != nil {
		return out, -1, hs.err
	}
	inst.dec.maxRecord = inst.t.maxRecord.Load()
	res, offset, err := inst.dec.decodeClosed(uint32(inst.stack[0]), c, out, &inst.arena)
	if err != nil && errors.Is(err, ErrBadOutput) {
		inst.broken = true
	}
	return res, offset, err
}

// runClosed writes the closing input of n bytes and calls
// processor_closed, which leaves the result's address in stack[0].
func (inst *instance) runClosed(c transform.Closing, stream int64, n uint32) error {
	buf, err := inst.inputView(n)
	if err != nil {
		return err
	}
	encodeClosing(buf, c, int32(slices.Index(inst.t.stores, c.Store)), stream)
	inst.stack[0], inst.stack[1] = uint64(inst.inPtr), uint64(n)
	return inst.call(inst.closedFn)
}

// encodeClosing writes the closing input of c into b (ABI.md): the
// store's name, the entry's key and value and the input topic after the
// fixed part, which holds their offsets and lengths, the partition, the
// store's index, the expiry and the stream time.
func encodeClosing(b []byte, c transform.Closing, store int32, stream int64) {
	le := binary.LittleEndian
	off := uint32(closingHeadSize)
	put := func(at int, v []byte) {
		le.PutUint32(b[at:], off)
		le.PutUint32(b[at+4:], uint32(len(v)))
		off += uint32(copy(b[off:], v))
	}
	put(0, []byte(c.Store))
	put(8, c.Key)
	put(16, c.Value)
	put(24, []byte(c.Topic))
	le.PutUint32(b[32:], uint32(c.Partition))
	le.PutUint32(b[36:], uint32(store))
	le.PutUint64(b[40:], uint64(c.Expiry.UnixMilli()))
	le.PutUint64(b[48:], uint64(stream))
}

// decodeClosed reads the closed result at address at: a result as
// processor_process returns, whose reserved word is the address of a
// table of the outputs' timestamps (0: none, every output is stamped
// with the entry's expiry), followed by the lineage offset. Nothing is
// appended unless all of it is valid.
func (d *decoder) decodeClosed(at uint32, c transform.Closing, out []*kgo.Record, a *arena) ([]*kgo.Record, int64, error) {
	d.err = nil
	if uint64(at)+closedResultSize > uint64(d.mem.Size()) {
		return out, -1, fmt.Errorf("%w: the closed result (%d bytes at %d) is outside the guest's %d bytes of memory", ErrBadOutput, closedResultSize, at, d.mem.Size())
	}
	count, ptr, err := d.result(at)
	if err != nil {
		return out, -1, err
	}
	le := binary.LittleEndian
	tail := d.view(at+12, 12, "the closed result")
	stampsAt, offset := le.Uint32(tail), int64(le.Uint64(tail[4:]))
	if offset < 0 {
		offset = -1
	}
	if count == 0 {
		return out, offset, nil
	}
	table := d.view(ptr, int32(count*outRecordSize), "the record table")
	var stamps []byte
	if stampsAt != 0 {
		stamps = d.view(stampsAt, int32(count*8), "the timestamp table")
	}
	if d.err != nil {
		return out, -1, fmt.Errorf("%w: %v", ErrBadOutput, d.err)
	}
	for i := 0; i < len(stamps); i += 8 {
		if ts := int64(le.Uint64(stamps[i:])); ts < 0 {
			return out, -1, fmt.Errorf("%w: output record %d has the timestamp %d", ErrBadOutput, i/8, ts)
		}
	}
	if err := d.readTable(table, count); err != nil {
		return out, -1, err
	}
	if err := checkTopics(d.recs, record.Source{Topic: c.Topic}); err != nil {
		return out, -1, err
	}
	first := len(out)
	out = d.materialize(&kgo.Record{Timestamp: c.Expiry}, out, a)
	if stamps != nil {
		for i, o := range out[first:] {
			o.Timestamp = time.UnixMilli(int64(le.Uint64(stamps[i*8:])))
		}
	}
	return out, offset, nil
}
