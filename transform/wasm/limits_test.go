package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// fakeMemory is guest memory for testing the decoder alone, which reads
// it through Read and Size only; the embedded nil api.Memory makes any
// other use panic.
type fakeMemory struct {
	api.Memory
	b []byte
}

func (m *fakeMemory) Size() uint32 { return uint32(len(m.b)) }

func (m *fakeMemory) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m.b)) {
		return nil, false
	}
	return m.b[off : off+n : off+n], true
}

// outputs lays out guest output in a fake memory: a result at 0, the
// record table right after it (tableAt), and whatever a test places with
// put, from next (which the test first sets past the table).
type outputs struct {
	mem  *fakeMemory
	next uint32 // where put places bytes next
}

// tableAt is where outputs lays out the record table.
const tableAt = resultSize

func newOutputs(size int) *outputs {
	return &outputs{mem: &fakeMemory{b: make([]byte, size)}}
}

// put copies b into memory at next and returns its address.
func (o *outputs) put(b []byte) uint32 {
	at := o.next
	copy(o.mem.b[at:], b)
	o.next += uint32(len(b))
	return at
}

// records writes a result of count records, each made by rec(i) as the
// table's eight words.
func (o *outputs) records(count uint32, rec func(i uint32) [8]uint32) {
	le := binary.LittleEndian
	le.PutUint32(o.mem.b[0:], statusOK)
	le.PutUint32(o.mem.b[4:], count)
	le.PutUint32(o.mem.b[8:], tableAt)
	for i := range count {
		w := rec(i)
		for j, v := range w {
			le.PutUint32(o.mem.b[tableAt+i*outRecordSize+uint32(j)*4:], v)
		}
	}
}

// headerTable places a table of n headers that all have key k and value
// v, and returns its address.
func (o *outputs) headerTable(n int, k, v uint32, klen, vlen uint32) uint32 {
	t := make([]byte, n*outHeaderSize)
	for i := range n {
		binary.LittleEndian.PutUint32(t[i*outHeaderSize:], k)
		binary.LittleEndian.PutUint32(t[i*outHeaderSize+4:], klen)
		binary.LittleEndian.PutUint32(t[i*outHeaderSize+8:], v)
		binary.LittleEndian.PutUint32(t[i*outHeaderSize+12:], vlen)
	}
	return o.put(t)
}

func (o *outputs) decode(maxBytes uint64) ([]*kgo.Record, error) {
	d := &decoder{mem: o.mem, maxBytes: maxBytes, maxRecord: math.MaxInt64}
	return d.decode(0, testSrc, value("in"), nil, &arena{})
}

// outputSize is what the bound counts of recs: the bytes of their topics,
// keys, values, header keys and header values.
func outputSize(recs []*kgo.Record) (bytes, headers uint64) {
	for _, r := range recs {
		bytes += uint64(len(r.Topic) + len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			bytes += uint64(len(h.Key) + len(h.Value))
		}
		headers += uint64(len(r.Headers))
	}
	return bytes, headers
}

const nullLen = 0xFFFFFFFF

// The bound on one call's output bytes counts every field of every record,
// shared guest bytes once per record, and fails the record with a message
// that says by how much; exactly the bound passes.
func TestDecodeByteBound(t *testing.T) {
	const region = 1 << 20
	for _, c := range []struct {
		name     string
		count    uint32
		maxBytes uint64
		want     string // "" is success
	}{
		{"one", 1, region + 2 + 1 + 1, ""},
		{"exactly the bound", 10, 10 * (region + 2 + 1 + 1), ""},
		{"one byte over", 10, 10*(region+2+1+1) - 1, "10 output records hold 10485800 bytes in all (topics, keys, values, headers), 1 more than the 10485799 one call may return"},
		{"a thousand views of one region", 1000, 64 << 20, "1000 output records hold 1048580000 bytes in all (topics, keys, values, headers), 981471136 more than the 67108864 one call may return (its MAX_MEMORY setting is 64MiB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOutputs(4 << 20)
			o.next = tableAt + c.count*outRecordSize
			val := o.put(make([]byte, region))
			key := o.put([]byte("kk"))
			hk, hv := o.put([]byte("h")), o.put([]byte("v"))
			hdrs := o.headerTable(1, hk, hv, 1, 1)
			o.records(c.count, func(uint32) [8]uint32 {
				return [8]uint32{0, 0, key, 2, val, region, hdrs, 1}
			})
			out, err := o.decode(c.maxBytes)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if n, _ := outputSize(out); len(out) != int(c.count) || n > c.maxBytes {
					t.Fatalf("%d outputs of %d bytes, want %d within %d", len(out), n, c.count, c.maxBytes)
				}
				return
			}
			if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrBadOutput containing %q", err, c.want)
			}
			if len(out) != 0 {
				t.Errorf("a failed record produced %d outputs", len(out))
			}
		})
	}
}

// Records that share one header table cannot multiply headers past the
// bound on one call's headers in all, whatever each record's count.
func TestDecodeHeaderBound(t *testing.T) {
	const perRecord = 30000
	for _, c := range []struct {
		name  string
		count uint32
		want  string
	}{
		{"within", maxOutputHeaders / perRecord, ""},
		{"over", maxOutputHeaders/perRecord + 1, "35 output records carry 1050000 headers in all, 1424 more than the 1048576 one call may return"},
		{"multiplied", 30000, "30000 output records carry 900000000 headers in all, 898951424 more than the 1048576"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOutputs(2 << 20)
			o.next = tableAt + c.count*outRecordSize
			hk := o.put([]byte("k"))
			hdrs := o.headerTable(perRecord, hk, 0, 1, nullLen)
			o.records(c.count, func(uint32) [8]uint32 {
				return [8]uint32{0, 0, 0, nullLen, 0, nullLen, hdrs, perRecord}
			})
			out, err := o.decode(64 << 20)
			if c.want == "" {
				if _, h := outputSize(out); err != nil || h != uint64(c.count)*perRecord {
					t.Fatalf("%d headers, %v", h, err)
				}
				return
			}
			if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrBadOutput containing %q", err, c.want)
			}
		})
	}
}

// Decoding a small output into the input record allocates nothing: the
// bounds are arithmetic on the way.
func TestDecodeAllocs(t *testing.T) {
	o := newOutputs(64 << 10)
	o.next = tableAt + outRecordSize
	key, val := o.put([]byte("k1")), o.put([]byte("a changed value"))
	o.records(1, func(uint32) [8]uint32 { return [8]uint32{0, 0, key, 2, val, 15, 0, 0} })
	d := &decoder{mem: o.mem, maxBytes: 64 << 20, maxRecord: transform.DefaultMaxOutputBytes}
	var a arena
	rec, out := value("in"), make([]*kgo.Record, 0, 1)
	if n := testing.AllocsPerRun(1000, func() {
		res, err := d.decode(0, testSrc, rec, out[:0], &a)
		if err != nil || len(res) != 1 {
			t.Fatal(res, err)
		}
	}); n != 0 {
		t.Errorf("decoding one small output allocates %v times, want 0", n)
	}
}

// A guest returning a thousand records that all point at one 4MiB region
// (4GiB once copied) fails the record at once with ErrBadOutput, without
// the host's heap growing by more than the guest's own memory; so does
// one returning 900,000,000 headers from one shared table. A fan-out
// within the bound works.
func TestOutputAmplification(t *testing.T) {
	cases := []struct {
		guest, value string
		want         string
	}{
		{misbehave, "amplify:1000:4194304", "1000 output records hold 4194306000 bytes in all (topics, keys, values, headers), 4127197136 more than the 67108864 one call may return (its MAX_MEMORY setting is 64MiB)"},
		{garbage, "shared-headers", "30000 output records carry 900000000 headers in all, 898951424 more than the 1048576 one call may return"},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.guest)+"/"+c.value, func(t *testing.T) {
			tr := newTest(t, c.guest, func(s *Settings) { s.Timeout = 5 * time.Second })
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			out, err := process(tr, value(c.value))
			el := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrBadOutput containing %q", err, c.want)
			}
			if len(out) != 0 {
				t.Errorf("a failed record produced %d outputs", len(out))
			}
			// The guest's memory (at most 64MiB, grown by copying) is
			// Go heap too; what must not show is a copy per record.
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("failed in %s; the host allocated %d MiB during the call, the heap grew by %d MiB", el, allocated>>20, (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>20)
			if allocated > 256<<20 {
				t.Errorf("the host allocated %d MiB during the call, want well under the 4GiB a copy per record would take", allocated>>20)
			}
			if el > 5*time.Second {
				t.Errorf("failing took %s", el)
			}
			if n := len(idle(tr)); n != 0 {
				t.Errorf("the instance that returned malformed output went back to the pool")
			}
			if out, err := process(tr, value("ok")); err != nil || len(out) != 1 {
				t.Fatalf("the record after: %v", err)
			}
		})
	}

	tr := newTest(t, misbehave)
	out, err := process(tr, value("amplify:8:1048576"))
	if err != nil || len(out) != 8 {
		t.Fatalf("a fan-out of 8MiB: %d outputs, %v", len(out), err)
	}
	for _, o := range out {
		if len(o.Value) != 1<<20 {
			t.Fatalf("an output of %d bytes, want 1MiB", len(o.Value))
		}
	}
}

// CallTimeout reports PROCESSOR_WASM_TIMEOUT, 0 when the deadline is off,
// through the transform.Timed interface.
func TestCallTimeout(t *testing.T) {
	for _, d := range []time.Duration{250 * time.Millisecond, 0} {
		var tr transform.Transform = newTest(t, uppercase, func(s *Settings) { s.Timeout = d })
		timed, ok := tr.(transform.Timed)
		if !ok {
			t.Fatal("the wasm transform does not implement transform.Timed")
		}
		if got := timed.CallTimeout(); got != d {
			t.Errorf("CallTimeout() = %s, want %s", got, d)
		}
	}
}

// A module is assembled here from raw sections, so the tests need no
// WebAssembly text tools.

func uleb128(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func sleb128(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// vec is a WebAssembly vector: a count, then the items.
func vec(items ...[]byte) []byte {
	b := uleb128(uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func section(id byte, payload []byte) []byte {
	return append(append([]byte{id}, uleb128(uint64(len(payload)))...), payload...)
}

func wasmName(s string) []byte { return append(uleb128(uint64(len(s))), s...) }

// body is a function body without locals.
func body(code ...byte) []byte {
	b := append([]byte{0x00}, code...) // no locals
	return append(uleb128(uint64(len(b))), b...)
}

// abiModule returns a module implementing the ABI's exports, with one
// funcref table of tableMin entries and abiVersion as the body of
// processor_abi_version (which the host calls at start).
// processor_alloc returns inputAt; processor_process returns the result
// at address 0, which holds zeros: no records.
func abiModule(tableMin uint64, abiVersion []byte) []byte {
	const i32 = 0x7f
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, vec( // types
		[]byte{0x60, 0x00, 0x01, i32},
		[]byte{0x60, 0x01, i32, 0x01, i32},
		[]byte{0x60, 0x02, i32, i32, 0x01, i32},
	))...)
	m = append(m, section(3, vec([]byte{0}, []byte{1}, []byte{2}))...)                  // functions
	m = append(m, section(4, vec(append([]byte{0x70, 0x00}, uleb128(tableMin)...)))...) // table: funcref, min
	m = append(m, section(5, vec([]byte{0x00, 0x01}))...)                               // memory: 1 page
	m = append(m, section(7, vec(                                                       // exports
		append(wasmName("memory"), 0x02, 0),
		append(wasmName("processor_abi_version"), 0x00, 0),
		append(wasmName("processor_alloc"), 0x00, 1),
		append(wasmName("processor_process"), 0x00, 2),
	))...)
	m = append(m, section(10, vec( // code
		abiVersion,
		body(append(append([]byte{0x41}, sleb128(inputAt)...), 0x0b)...), // i32.const inputAt
		body(0x41, 0x00, 0x0b), // i32.const 0
	))...)
	return m
}

// inputAt is where the hand-built module's input buffer starts.
const inputAt = 1024

// versionOne is `i32.const 1`.
var versionOne = body(0x41, 0x01, 0x0b)

// tableGrow grows the table by 2^30 entries (8GiB of host memory if it
// were allowed) before reporting version 1:
//
//	ref.null func
//	i32.const 0x40000000
//	table.grow 0
//	drop
//	i32.const 1
var tableGrow = body(append(append([]byte{0xd0, 0x70, 0x41}, sleb128(1<<30)...), 0xfc, 0x0f, 0x00, 0x1a, 0x41, 0x01, 0x0b)...)

func writeModule(t *testing.T, bin []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(path, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Modules that would make the host allocate outside the memory limit
// when instantiated or called are configuration errors naming
// PROCESSOR_WASM_MODULE: one using reference types (table.grow), one
// declaring a huge table. The same modules compile under wazero's
// defaults, so the refusal is the host's limits, not a malformed module.
func TestHostileModules(t *testing.T) {
	for _, c := range []struct {
		name string
		bin  []byte
		want string
	}{
		{"table.grow", abiModule(0, tableGrow), `want a WebAssembly module that does not use reference types, which the host turns off (invalid function[0] export["processor_abi_version"]: ref.null invalid as feature "reference-types" is disabled)`},
		{"huge table", abiModule(1<<27, versionOne), fmt.Sprintf("want a module whose table holds at most %d entries (it declares 134217728)", maxTable)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := wazero.NewRuntime(context.Background())
			defer rt.Close(context.Background())
			if _, err := rt.CompileModule(context.Background(), c.bin); err != nil {
				t.Fatalf("the test module does not compile under wazero's defaults: %v", err)
			}

			path := writeModule(t, c.bin)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := New(&Settings{Module: path, MaxMemory: 64 << 20, Timeout: time.Second})
			runtime.ReadMemStats(&after)
			var se *settings.Error
			if !errors.As(err, &se) || se.Field != "MODULE" || se.Value != path {
				t.Fatalf("got %v (%T), want a *settings.Error naming MODULE", err, err)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %q, want one line containing %q", err, c.want)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
				t.Errorf("refusing the module allocated %d MiB", n>>20)
			}
		})
	}

	// A table of the largest size allowed loads, and the module works.
	tr, err := newTransform(&Settings{Module: writeModule(t, abiModule(maxTable, versionOne)), MaxMemory: 1 << 20, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if out, err := process(tr, value("x")); err != nil || len(out) != 0 {
		t.Fatalf("the hand-built module should filter every record: %v, %v", out, err)
	}
}

func TestTableSize(t *testing.T) {
	for _, n := range []uint64{0, 1, 127, 128, 6000, 1 << 27} {
		if got := tableSize(abiModule(n, versionOne)); got != n {
			t.Errorf("tableSize of a module with a table of %d = %d", n, got)
		}
	}
	noTable := func(b ...byte) []byte { return append([]byte("\x00asm\x01\x00\x00\x00"), b...) }
	for _, b := range [][]byte{nil, noTable(), noTable(4), noTable(4, 0x80), noTable(0, 5, 'x')} {
		if got := tableSize(b); got != 0 {
			t.Errorf("tableSize(%x) = %d, want 0", b, got)
		}
	}
	for _, g := range []string{uppercase, misbehave} {
		bin, err := os.ReadFile(guestPath(t, g))
		if err != nil {
			t.Fatal(err)
		}
		if n := tableSize(bin); n == 0 || n > maxTable/16 {
			t.Errorf("%s: a table of %d entries; a Go guest's should be a few thousand", g, n)
		}
	}
}

// An invalid topic of a megabyte fails the record with a short message:
// it ends up in logs and dead-letter headers.
func TestLongTopicQuoted(t *testing.T) {
	o := newOutputs(2 << 20)
	o.next = tableAt + outRecordSize
	topic := o.put([]byte(strings.Repeat("\x00", 1<<20)))
	o.records(1, func(uint32) [8]uint32 { return [8]uint32{topic, 1 << 20, 0, nullLen, 0, nullLen, 0, 0} })
	_, err := o.decode(64 << 20)
	if err == nil || !strings.Contains(err.Error(), `... (1048576 bytes): want a topic name`) || len(err.Error()) > 2048 {
		t.Fatalf("got a message of %d bytes: %.300v", len(fmt.Sprint(err)), err)
	}
}

// A guest that returns more bytes for one record than the chain's limit
// on one record's outputs (16MiB by default) fails that record with a
// *transform.OutputLimitError, found from its output table before
// anything is copied out of guest memory, however much memory the guest
// may use (64MiB here, which let both outputs through before): forty
// records that all point at one 1MiB region, and one 20MiB value. The
// guest followed the ABI, so its instance goes back to the pool. Through
// a chain the limit is the chain's, and the error names the stage.
func TestGuestReturnsTooManyBytes(t *testing.T) {
	for _, c := range []struct {
		value   string
		records int
	}{{"amplify:40:1048576", 40}, {"big:20971520", 1}} {
		t.Run(c.value, func(t *testing.T) {
			// A generous deadline: the guest writes 20MiB, which under the race
			// detector on a loaded machine can take longer than the usual 1s.
			tr := newTest(t, misbehave, func(s *Settings) { s.Timeout = 10 * time.Second })
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			out, err := process(tr, value(c.value))
			runtime.ReadMemStats(&after)
			var le *transform.OutputLimitError
			if !errors.As(err, &le) || errors.Is(err, ErrBadOutput) || le.Limit != transform.DefaultMaxOutputBytes || le.Records != c.records {
				t.Fatalf("got %v, want an *OutputLimitError for %d records against the default limit", err, c.records)
			}
			if len(out) != 0 {
				t.Errorf("a failed record produced %d outputs", len(out))
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: the host allocated %d MiB during the call (the guest's memory growth included)", c.value, allocated>>20)
			if c.records == 40 && allocated > 16<<20 {
				t.Errorf("the host allocated %d MiB, want well under the 40MiB the copies would take", allocated>>20)
			}
			if n := len(idle(tr)); n != 1 {
				t.Errorf("%d idle instances, want the one that followed the ABI back in the pool", n)
			}
			if out, err := process(tr, value("ok")); err != nil || len(out) != 1 {
				t.Fatalf("the record after: %v", err)
			}
		})
	}

	spec, _ := transform.Default.Lookup("wasm")
	reg := &transform.Registry{}
	reg.Register("wasm", spec)
	settings := map[string]string{"MODULE": guestPath(t, misbehave), "MAX_MEMORY": "64MiB", "TIMEOUT": "10s"}
	chain, err := reg.Build([]transform.Entry{{Name: "wasm"}}, func(_ transform.Entry, s string) (string, bool) {
		v, ok := settings[s]
		return v, ok
	}, transform.MaxOutputBytes(2<<20), transform.WithNames(transform.Names{Limit: "PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD"}))
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	_, err = chain.Process(context.Background(), testSrc, value("amplify:3:1048576"), nil)
	var te *transform.Error
	var le *transform.OutputLimitError
	if !errors.As(err, &te) || te.Stage != "wasm" || !errors.As(err, &le) || le.Limit != 2<<20 ||
		!strings.Contains(err.Error(), "transform wasm: the outputs of one input record passed PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD=2MiB (3 records") {
		t.Fatalf("3MiB under a 2MiB chain limit: %v", err)
	}
	if out, err := chain.Process(context.Background(), testSrc, value("amplify:1:1048576"), nil); err != nil || len(out) != 1 {
		t.Fatalf("1MiB under a 2MiB chain limit: %d outputs, %v", len(out), err)
	}
}

// Empty records hold no bytes but take memory: a count of them whose
// records alone pass the limit fails before the decoder makes room for
// them.
func TestDecodeEmptyRecordsCount(t *testing.T) {
	const count = 200_000 // 200,000 records of 160 bytes each: 32MB, over 16MiB
	o := newOutputs(tableAt + count*outRecordSize)
	o.records(count, func(uint32) [8]uint32 { return [8]uint32{0, nullLen, 0, nullLen, 0, 0, 0, 0} })
	d := &decoder{mem: o.mem, maxBytes: 64 << 20, maxRecord: transform.DefaultMaxOutputBytes}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := d.decode(0, testSrc, value("in"), nil, &arena{})
	runtime.ReadMemStats(&after)
	var le *transform.OutputLimitError
	if !errors.As(err, &le) || le.Records != count || len(out) != 0 {
		t.Fatalf("got %d outputs, %v; want an OutputLimitError for %d records", len(out), err, count)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
		t.Errorf("failing allocated %d KiB", allocated>>10)
	}
}
