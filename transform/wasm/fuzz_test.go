package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// FuzzWasmUppercase sends random keys, values and headers through the
// uppercase example across the ABI: the value comes back upper-cased, the
// key and headers unchanged.
func FuzzWasmUppercase(f *testing.F) {
	f.Add([]byte("k"), []byte("hello"), "h", []byte("v"))
	f.Add([]byte(nil), []byte(nil), "", []byte(nil))
	f.Add([]byte{0, 0xff}, bytes.Repeat([]byte("ab\x00"), 300), "\x00", []byte{0xc3, 0xa9})
	tr := newTest(f, uppercase)
	f.Fuzz(func(t *testing.T, key, value []byte, hk string, hv []byte) {
		r := &kgo.Record{Key: key, Value: value, Headers: []kgo.RecordHeader{{Key: hk, Value: hv}}}
		out, err := tr.Process(context.Background(), record.Source{Topic: "in", Partition: 1, Offset: 2}, r, nil)
		if err != nil || len(out) != 1 {
			t.Fatalf("%v, %d outputs", err, len(out))
		}
		o := out[0]
		if !bytes.Equal(o.Value, bytes.ToUpper(value)) || !bytes.Equal(o.Key, key) {
			t.Fatalf("value %q key %q, want %q %q", o.Value, o.Key, bytes.ToUpper(value), key)
		}
		if len(o.Headers) != 1 || o.Headers[0].Key != hk || !bytes.Equal(o.Headers[0].Value, hv) {
			t.Fatalf("headers %v", o.Headers)
		}
	})
}

// FuzzDecodeAmplification builds guest output tables from the fuzz input
// (record and header counts, addresses, lengths, and raw bytes laid over
// the start of the record table) in a 1MiB guest memory, many records
// pointing at one large region among them, and decodes them with the
// memory's size as the bound, as an instance does. The decoder must fail
// the record or return outputs within the bounds, and allocate about
// what it returns: never a copy per record of shared bytes.
func FuzzDecodeAmplification(f *testing.F) {
	const memSize = 1 << 20
	// count, key length, value address, value length, value stride,
	// headers per record, header value length, raw table bytes.
	f.Add(uint16(1000), uint32(2), uint32(64<<10), uint32(512<<10), uint32(0), uint16(0), uint32(0), []byte(nil))
	f.Add(uint16(1), uint32(2), uint32(64<<10), uint32(100), uint32(0), uint16(1), uint32(3), []byte(nil))
	f.Add(uint16(10), uint32(0), uint32(64<<10), uint32(90<<10), uint32(90<<10), uint16(2), uint32(10), []byte(nil))
	f.Add(uint16(12), uint32(0), uint32(64<<10), uint32(90<<10), uint32(0), uint16(0), uint32(0), []byte(nil))
	f.Add(uint16(20000), uint32(0), uint32(0), uint32(0), uint32(0), uint16(200), uint32(0), []byte(nil))
	f.Add(uint16(500), uint32(1), uint32(900<<10), uint32(0), uint32(0), uint16(1000), uint32(64<<10), []byte(nil))
	f.Add(uint16(3), uint32(0), uint32(0), uint32(0), uint32(0), uint16(0), uint32(0), []byte("\x00\x00\x00\x00\xff\xff\xff\xff\x40\x00\x00\x00\x08\x00\x00\x00"))

	mem := &fakeMemory{b: make([]byte, memSize)}
	d := &decoder{mem: mem, maxBytes: memSize, maxRecord: transform.DefaultMaxOutputBytes}
	var a arena
	f.Fuzz(func(t *testing.T, count uint16, keyLen, valuePtr, valueLen, stride uint32, nh uint16, hvLen uint32, raw []byte) {
		le := binary.LittleEndian
		clear(mem.b)
		valuePtr %= memSize
		valueLen %= memSize + 1
		keyLen %= 64
		hvLen %= memSize + 1
		le.PutUint32(mem.b[4:], uint32(count))
		le.PutUint32(mem.b[8:], tableAt)
		hkey := uint32(memSize - 16)
		copy(mem.b[hkey:], "header-key")
		hdrAt := hkey - uint32(nh)*outHeaderSize
		if uint32(nh)*outHeaderSize > hkey {
			hdrAt = 0 // the table runs off the start: a malformed output
		}
		for j := range uint32(nh) {
			h := mem.b[hdrAt+j*outHeaderSize:]
			le.PutUint32(h, hkey)
			le.PutUint32(h[4:], 10)
			le.PutUint32(h[8:], valuePtr)
			le.PutUint32(h[12:], hvLen)
		}
		for i := range uint32(count) {
			at := uint64(tableAt) + uint64(i)*outRecordSize
			if at+outRecordSize > hdrAt64(hdrAt, nh) {
				break // the header table takes over; the decoder sees what is there
			}
			r := mem.b[at:]
			le.PutUint32(r[8:], valuePtr)
			le.PutUint32(r[12:], keyLen)
			le.PutUint32(r[16:], uint32((uint64(valuePtr)+uint64(i)*uint64(stride))%memSize))
			le.PutUint32(r[20:], valueLen)
			le.PutUint32(r[24:], hdrAt)
			le.PutUint32(r[28:], uint32(nh))
		}
		copy(mem.b[tableAt:], raw)

		// The headers the records declare, as the decoder reads them.
		var declared uint64
		for i := range uint64(count) {
			if at := tableAt + i*outRecordSize + 28; at+4 <= memSize {
				declared += uint64(le.Uint32(mem.b[at:]))
			}
		}

		rec := value("in")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, err := d.decode(0, testSrc, rec, nil, &a)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc

		n, headers := outputSize(out)
		// What an output may cost beyond its bytes: its records and
		// headers, the decoder's scratch, and a chunk of the arena.
		overhead := uint64(count)*1024 + min(declared, maxOutputHeaders)*256 + 1<<20
		if err != nil {
			if len(out) != 0 {
				t.Fatalf("%v, yet %d outputs", err, len(out))
			}
			if allocated > overhead {
				t.Fatalf("failing the record (%v) allocated %d bytes", err, allocated)
			}
			return
		}
		if len(out) != int(count) || n > memSize || headers > maxOutputHeaders {
			t.Fatalf("%d outputs of %d bytes and %d headers, beyond the bounds (%d bytes, %d headers)", len(out), n, headers, memSize, maxOutputHeaders)
		}
		if allocated > 2*n+overhead {
			t.Fatalf("%d outputs of %d bytes allocated %d bytes", len(out), n, allocated)
		}
	})
}

// hdrAt64 is where the records' room ends: the header table, or the
// memory's end when there is none.
func hdrAt64(hdrAt uint32, nh uint16) uint64 {
	if nh == 0 || hdrAt == 0 {
		return 1 << 20
	}
	return uint64(hdrAt)
}
