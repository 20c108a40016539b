package wasm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tetratelabs/wazero/api"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/bytesize"
	"github.com/streamproc/processor/internal/topic"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/internal/topics"
)

// The memory layouts are ABI.md's: little-endian, fixed-size structs of
// 32-bit words (64-bit for offset and timestamp), lengths of -1 for null.
// The input holds offsets relative to its start; the output holds absolute
// guest addresses, so a guest can point at bytes wherever they are.

const (
	statusOK    = 0
	statusError = 1

	inputHeadSize = 56 // the fixed start of an input
	inHeaderSize  = 16 // one input header: key off, len; value off, len
	resultSize    = 16 // status, count, table or message address, reserved
	outRecordSize = 32 // topic, key, value, headers: address and length each
	outHeaderSize = 16 // key address, len; value address, len

	// maxOutputs bounds the records one input may produce, and
	// maxOutputHeaders the headers of all of them together: output
	// records may share one header table, so the count of each record
	// alone does not bound what the host allocates for a call.
	maxOutputs       = 1 << 20
	maxOutputHeaders = 1 << 20
	// maxGuestMessage caps how much of a guest's error message is quoted.
	maxGuestMessage = 1024
)

// inputSize returns the size of rec's input buffer.
func inputSize(src record.Source, rec *kgo.Record) (uint32, error) {
	n := uint64(inputHeadSize + len(src.Topic) + len(rec.Key) + len(rec.Value) + 3 + inHeaderSize*len(rec.Headers))
	for _, h := range rec.Headers {
		n += uint64(len(h.Key) + len(h.Value))
	}
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("the record needs %d bytes of guest memory, more than the ABI's 2GiB", n)
	}
	return uint32(n), nil
}

// encodeInput writes rec's input into b, which is exactly inputSize bytes:
// a view of guest memory, so each byte is copied once.
func encodeInput(b []byte, src record.Source, rec *kgo.Record) {
	le := binary.LittleEndian
	off := uint32(inputHeadSize)
	put := func(at int, v []byte) {
		if v == nil {
			le.PutUint32(b[at:], 0)
			le.PutUint32(b[at+4:], null)
			return
		}
		le.PutUint32(b[at:], off)
		le.PutUint32(b[at+4:], uint32(len(v)))
		off += uint32(copy(b[off:], v))
	}
	le.PutUint32(b[0:], off)
	le.PutUint32(b[4:], uint32(len(src.Topic)))
	off += uint32(copy(b[off:], src.Topic))
	put(8, rec.Key)
	put(16, rec.Value)
	off = (off + 3) &^ 3 // the header table is 4-byte aligned
	le.PutUint32(b[24:], off)
	le.PutUint32(b[28:], uint32(len(rec.Headers)))
	le.PutUint32(b[32:], uint32(src.Partition))
	le.PutUint32(b[36:], 0)
	le.PutUint64(b[40:], uint64(src.Offset))
	le.PutUint64(b[48:], uint64(rec.Timestamp.UnixMilli()))
	table := off
	off += uint32(inHeaderSize * len(rec.Headers))
	for _, h := range rec.Headers {
		le.PutUint32(b[table:], off)
		le.PutUint32(b[table+4:], uint32(len(h.Key)))
		off += uint32(copy(b[off:], h.Key))
		if h.Value == nil {
			le.PutUint32(b[table+8:], 0)
			le.PutUint32(b[table+12:], null)
		} else {
			le.PutUint32(b[table+8:], off)
			le.PutUint32(b[table+12:], uint32(len(h.Value)))
			off += uint32(copy(b[off:], h.Value))
		}
		table += inHeaderSize
	}
}

const null = math.MaxUint32

// rawRecord is one output record as views into guest memory.
type rawRecord struct {
	topic, key, value []byte // nil: null (for topic: the default topic)
	hdrs              int    // its headers are the next hdrs of decoder.hdrs
}

type rawHeader struct{ key, value []byte }

// decoder reads a guest's output. Its scratch slices are reused, so
// reading allocates nothing; only the records it materializes do.
type decoder struct {
	mem api.Memory
	// commit, when set, runs once the output is known to be good, before
	// anything of it is materialized: it applies the record's state
	// writes, and its error fails the record with rec left as it was.
	commit func() error
	recs   []rawRecord
	hdrs   []rawHeader
	err    error // the first read outside guest memory

	// maxBytes bounds the bytes of one call's outputs taken together:
	// the sum of the lengths of their topics, keys, values, header keys
	// and header values, which is what materializing them copies. Output
	// fields may point at the same guest bytes, so the guest's memory
	// alone does not bound it. It is the instance's memory limit
	// (its MAX_MEMORY setting in whole pages): a guest that writes
	// each output byte once cannot exceed it.
	maxBytes uint64
	// maxRecord is the chain's limit on one input record's outputs,
	// counted as transform.Size counts them (no topics; the records'
	// and headers' own memory): checked before anything is copied too.
	maxRecord int64
}

// view returns n bytes of guest memory at ptr; -1 is nil (null).
func (d *decoder) view(ptr uint32, n int32, what string) []byte {
	if n < 0 || d.err != nil {
		if n != -1 && d.err == nil {
			d.err = fmt.Errorf("%s has length %d", what, n)
		}
		return nil
	}
	b, ok := d.mem.Read(ptr, uint32(n))
	if !ok {
		d.err = fmt.Errorf("%s (%d bytes at %d) is outside the guest's %d bytes of memory", what, n, ptr, d.mem.Size())
		return nil
	}
	return b
}

// decode reads the result at address at and appends its records to out;
// the first reuses rec. Output that breaks the ABI wraps ErrBadOutput, a
// guest-reported error ErrGuest. Nothing is appended, and rec is left as
// it was, unless the whole output is valid.
func (d *decoder) decode(at uint32, src record.Source, rec *kgo.Record, out []*kgo.Record, a *arena) ([]*kgo.Record, error) {
	d.err = nil
	count, ptr, err := d.result(at)
	if err != nil {
		return out, err
	}
	if count > 0 {
		table := d.view(ptr, int32(count*outRecordSize), "the record table")
		if d.err != nil {
			return out, fmt.Errorf("%w: %v", ErrBadOutput, d.err)
		}
		if err := d.readTable(table, count); err != nil {
			return out, err
		}
		if err := checkTopics(d.recs, src); err != nil {
			return out, err
		}
	}
	// The output is good: the record's state writes may go in.
	if d.commit != nil {
		if err := d.commit(); err != nil {
			return out, err
		}
	}
	if count == 0 {
		return out, nil // filtered
	}
	return d.materialize(rec, out, a), nil
}

// result reads the result at address at: the count of output records and
// the address of their table, or the guest's error.
func (d *decoder) result(at uint32) (count, ptr uint32, err error) {
	le := binary.LittleEndian
	res := d.view(at, resultSize, "the result")
	if d.err != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrBadOutput, d.err)
	}
	status, count, ptr := le.Uint32(res), le.Uint32(res[4:]), le.Uint32(res[8:])
	switch status {
	case statusOK:
	case statusError:
		msg := d.view(ptr, int32(min(count, maxGuestMessage)), "the error message")
		if d.err != nil {
			return 0, 0, fmt.Errorf("%w: %v", ErrBadOutput, d.err)
		}
		if count > maxGuestMessage {
			return 0, 0, fmt.Errorf("%w: %s...", ErrGuest, msg)
		}
		return 0, 0, fmt.Errorf("%w: %s", ErrGuest, msg)
	default:
		return 0, 0, fmt.Errorf("%w: unknown status %d", ErrBadOutput, status)
	}
	if count > maxOutputs {
		return 0, 0, fmt.Errorf("%w: %d output records, more than the %d allowed", ErrBadOutput, count, maxOutputs)
	}
	return count, ptr, nil
}

// readTable reads the table of count records into d.recs and d.hdrs,
// views of guest memory, checking the bounds on their headers and bytes;
// nothing is copied until all of it is known to be within bounds.
func (d *decoder) readTable(table []byte, count uint32) error {
	le := binary.LittleEndian
	// Records may share one header table, so their header counts are
	// added up, and bounded, before anything is read for them.
	var nhdrs uint64
	for i := range count {
		nhdrs += uint64(le.Uint32(table[i*outRecordSize+28:]))
	}
	if nhdrs > maxOutputHeaders {
		return fmt.Errorf("%w: %d output records carry %d headers in all, %d more than the %d one call may return", ErrBadOutput, count, nhdrs, nhdrs-maxOutputHeaders, maxOutputHeaders)
	}
	// Empty records and headers hold no bytes but take memory, the
	// scratch below included: their count alone may pass the limit.
	size := int64(count)*transform.RecordOverhead + int64(nhdrs)*transform.HeaderOverhead
	if size > d.maxRecord {
		return &transform.OutputLimitError{Limit: d.maxRecord, Bytes: size, Records: int(count)}
	}
	// Read the table, adding up the bytes the outputs would copy (nbytes)
	// and their size as transform.Size counts it.
	d.recs, d.hdrs = scratch(d.recs, int(count)), scratch(d.hdrs, int(nhdrs))
	var nbytes uint64
	for i := uint32(0); i < count && d.err == nil; i++ {
		n, sz := d.readRecord(table[i*outRecordSize:])
		nbytes += n
		size += sz
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrBadOutput, d.err)
	}
	if nbytes > d.maxBytes {
		return fmt.Errorf("%w: %d output records hold %d bytes in all (topics, keys, values, headers), %d more than the %d one call may return (its MAX_MEMORY setting is %s)", ErrBadOutput, count, nbytes, nbytes-d.maxBytes, d.maxBytes, bytesize.Size(d.maxBytes))
	}
	if size > d.maxRecord {
		return &transform.OutputLimitError{Limit: d.maxRecord, Bytes: size, Records: int(count)}
	}
	return nil
}

// readRecord reads one entry r of the record table into d.recs, and its
// headers into d.hdrs, and returns the bytes materializing it copies and
// its key, value and header bytes.
func (d *decoder) readRecord(r []byte) (nbytes uint64, size int64) {
	le := binary.LittleEndian
	var rr rawRecord
	rr.topic = d.view(le.Uint32(r), int32(le.Uint32(r[4:])), "a topic")
	rr.key = d.view(le.Uint32(r[8:]), int32(le.Uint32(r[12:])), "a key")
	rr.value = d.view(le.Uint32(r[16:]), int32(le.Uint32(r[20:])), "a value")
	nbytes += uint64(len(rr.topic) + len(rr.key) + len(rr.value))
	size += int64(len(rr.key) + len(rr.value))
	nh := le.Uint32(r[28:])
	if nh > 0 {
		ht := d.view(le.Uint32(r[24:]), int32(nh*outHeaderSize), "a header table")
		for j := uint32(0); j < nh && d.err == nil; j++ {
			h := ht[j*outHeaderSize:]
			k := d.view(le.Uint32(h), int32(le.Uint32(h[4:])), "a header key")
			if k == nil && d.err == nil {
				d.err = errors.New("a header key is null")
			}
			v := d.view(le.Uint32(h[8:]), int32(le.Uint32(h[12:])), "a header value")
			nbytes += uint64(len(k) + len(v))
			size += int64(len(k) + len(v))
			d.hdrs = append(d.hdrs, rawHeader{key: k, value: v})
		}
	}
	rr.hdrs = int(nh)
	d.recs = append(d.recs, rr)
	return nbytes, size
}

// checkTopics refuses an output topic that is not a valid name, or that
// is the input's own topic.
func checkTopics(recs []rawRecord, src record.Source) error {
	for i, rr := range recs {
		if len(rr.topic) > 0 {
			if !topic.Valid(rr.topic) {
				return fmt.Errorf("output record %d names topic %s: want %s", i, quoteHead(rr.topic), topic.Form)
			}
			if string(rr.topic) == src.Topic {
				return fmt.Errorf("output record %d names its input topic %q, which would feed it back into the processor", i, rr.topic)
			}
		}
	}
	return nil
}

// materialize appends the records read into d.recs and d.hdrs to out,
// copied out of guest memory into a; the first reuses rec, keeping parts
// of the input that the output repeats.
func (d *decoder) materialize(rec *kgo.Record, out []*kgo.Record, a *arena) []*kgo.Record {
	// The input's parts are kept aside: rec becomes output 0.
	inKey, inValue, inHdrs, ts := rec.Key, rec.Value, rec.Headers, rec.Timestamp
	hdrs := d.hdrs
	for i, rr := range d.recs {
		o := rec
		if i > 0 {
			o = &kgo.Record{Timestamp: ts}
		}
		o.Topic = ""
		if len(rr.topic) > 0 {
			o.Topic = a.str(rr.topic)
		}
		o.Key = a.reuse(rr.key, inKey)
		o.Value = a.reuse(rr.value, inValue)
		h := hdrs[:rr.hdrs]
		hdrs = hdrs[rr.hdrs:]
		if i == 0 && sameHeaders(h, inHdrs) {
			o.Headers = inHdrs
		} else {
			o.Headers = a.headers(h, inHdrs)
		}
		out = append(out, o)
	}
	return out
}

// maxQuoted caps how much of an invalid topic an error message quotes: a
// guest's "topic" may be megabytes, and the message ends up in logs and
// dead-letter headers.
const maxQuoted = 256

// quoteHead quotes b, or its first maxQuoted bytes and its length.
func quoteHead(b []byte) string {
	if len(b) <= maxQuoted {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("%q... (%d bytes)", b[:maxQuoted], len(b))
}

// keepScratch is the most records or headers a decoder's scratch keeps
// room for between calls that need less, so that one large output does
// not pin its arrays for the instance's life.
const keepScratch = 4096

// scratch returns s emptied, with room for n elements.
func scratch[T any](s []T, n int) []T {
	if cap(s) > keepScratch && n <= keepScratch {
		s = nil
	}
	return slices.Grow(s[:0], n)
}

// sameHeaders reports whether the guest returned the input's headers.
func sameHeaders(h []rawHeader, in []kgo.RecordHeader) bool {
	if len(h) != len(in) {
		return false
	}
	for i := range h {
		if string(h[i].key) != in[i].Key || (h[i].value == nil) != (in[i].Value == nil) || !bytes.Equal(h[i].value, in[i].Value) {
			return false
		}
	}
	return true
}

// arena holds the bytes and headers of output records. It hands out
// pieces of large chunks and starts a new chunk when one is full, never
// reusing one, so records stay valid for as long as they are referenced
// and the garbage collector frees a chunk once none is. Per record this
// costs a copy but, amortized, no allocation.
type arena struct {
	b    []byte
	h    []kgo.RecordHeader
	strs topics.Interner
}

const (
	byteChunk   = 64 << 10 // bytes per chunk
	ownAlloc    = 8 << 10  // bigger pieces get an allocation of their own
	headerChunk = 1024     // headers per chunk
)

// empty is the value of non-null empty output bytes.
var empty = []byte{}

// reuse returns orig when v holds the same bytes (an unchanged key or
// value), else a copy of v; nil stays nil.
func (a *arena) reuse(v, orig []byte) []byte {
	if v == nil {
		return nil
	}
	if orig != nil && bytes.Equal(v, orig) {
		return orig
	}
	return a.bytes(v)
}

// bytes returns a copy of v that outlives the guest call.
func (a *arena) bytes(v []byte) []byte {
	if len(v) == 0 {
		return empty
	}
	if len(v) > ownAlloc {
		return bytes.Clone(v)
	}
	if len(a.b)+len(v) > cap(a.b) {
		a.b = make([]byte, 0, byteChunk)
	}
	start := len(a.b)
	a.b = append(a.b, v...)
	return a.b[start:len(a.b):len(a.b)]
}

// str returns v as an interned string (topics, header keys).
func (a *arena) str(v []byte) string { return a.strs.String(v) }

// headers builds an output header slice, sharing the input's key strings
// and values where the guest returned them unchanged.
func (a *arena) headers(h []rawHeader, in []kgo.RecordHeader) []kgo.RecordHeader {
	if len(h) == 0 {
		return nil
	}
	if len(a.h)+len(h) > cap(a.h) {
		a.h = make([]kgo.RecordHeader, 0, max(headerChunk, len(h)))
	}
	start := len(a.h)
	for i, rh := range h {
		var key string
		var orig []byte
		if i < len(in) && string(rh.key) == in[i].Key {
			key, orig = in[i].Key, in[i].Value
		} else {
			key = a.str(rh.key)
		}
		a.h = append(a.h, kgo.RecordHeader{Key: key, Value: a.reuse(rh.value, orig)})
	}
	return a.h[start:len(a.h):len(a.h)]
}
