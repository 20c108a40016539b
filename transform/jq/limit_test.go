package jq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/transformtest"
)

// bigOrder is a JSON order of n items of about 200 bytes each: with 5,000
// items, a 1MB value.
func bigOrder(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"order_id":"ord-1","customer":"cust-1","items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		item := fmt.Sprintf(`{"sku":"sku-%06d","qty":%d,"price_cents":%d,"note":"`, i, 1+i%5, 100+i)
		b.WriteString(item)
		b.WriteString(strings.Repeat("n", 200-len(item)-2))
		b.WriteString(`"}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// heapWatch samples the live heap every millisecond until stopped, and
// cancels its context once the heap has grown by more than ceiling since
// it started: a test of a bound must not take the machine down when the
// bound is missing.
type heapWatch struct {
	base, peak uint64
	tripped    bool
	stop       chan struct{}
	done       sync.WaitGroup
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func watchHeap(ceiling uint64, cancel context.CancelFunc) *heapWatch {
	runtime.GC()
	w := &heapWatch{base: liveHeap(), stop: make(chan struct{})}
	w.peak = w.base
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			h := liveHeap()
			w.peak = max(w.peak, h)
			if h > w.base+ceiling && !w.tripped {
				w.tripped = true
				cancel()
			}
		}
	}()
	return w
}

// growth stops the watch and returns by how much the heap grew at its
// peak.
func (w *heapWatch) growth() uint64 {
	close(w.stop)
	w.done.Wait()
	w.peak = max(w.peak, liveHeap())
	return w.peak - w.base
}

// An ordinary program over one large order: each item becomes a copy of
// the whole order with the item set (.items[] as $i | .item = $i). Over a
// 1MB order of 5,000 items that is 5,000 copies of 1MB, 5GB, which would
// kill the process. The record fails at once with an OutputLimitError
// naming the jq stage, a permanent error for PROCESSOR_ON_ERROR, having
// encoded only about the limit's worth of results; the heap grows by about
// the limit, and nothing of it stays once the record has failed. The same
// order flat-mapped into its items (.items[]) passes.
func TestAmplifiedOrderFailsWithinTheLimit(t *testing.T) {
	order := bigOrder(5000)
	if len(order) < 1_000_000 || len(order) > 1_100_000 {
		t.Fatalf("the order is %d bytes, want about 1MB", len(order))
	}
	// The limit is named as the processor names it.
	chain, err := transformtest.Build("jq", map[string]string{"EXPR": ".items[] as $i | .item = $i"},
		transform.WithNames(transform.Names{Limit: "PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &kgo.Record{Key: []byte("ord-1"), Value: order}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := watchHeap(1<<30, cancel)
	start := time.Now()
	out, err := chain.Process(ctx, src, r, nil)
	el := time.Since(start)
	grew := w.growth()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%v; failed in %s: peak heap growth %.1f MiB, %.1f MiB allocated in all (a 1MB order; without a byte bound: 5000 copies, 5GB)",
		err, el, float64(grew)/(1<<20), float64(allocated)/(1<<20))

	if w.tripped {
		t.Fatalf("the heap grew past 1GiB, and the watch stopped the program: %v", err)
	}
	var te *transform.Error
	var le *transform.OutputLimitError
	if !errors.As(err, &te) || te.Stage != "jq" || !errors.As(err, &le) || transform.IsRetriable(err) {
		t.Fatalf("got %v, want a permanent *transform.Error of stage jq wrapping an *transform.OutputLimitError", err)
	}
	if le.Limit != transform.DefaultMaxOutputBytes || le.Bytes <= le.Limit || le.Records > 20 {
		t.Errorf("the error reports %+v, want the 16MiB limit passed after about 16 results", le)
	}
	if want := "transform jq: the outputs of one input record passed PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD=16MiB"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %q, want it to start %q", err, want)
	}
	if len(out) != 0 || string(r.Value) != string(order) {
		t.Errorf("a failed record must produce nothing and stay as it was")
	}
	// Peak: the limit's worth of results, the parsed order and one
	// result's encoding; not 5,000 copies.
	if grew > 64<<20 || allocated > 128<<20 {
		t.Errorf("the heap grew by %d MiB (%d MiB allocated), want about the 16MiB limit", grew>>20, allocated>>20)
	}
	runtime.GC()
	if kept := int64(liveHeap()) - int64(w.base); kept > 4<<20 {
		t.Errorf("%d MiB stay on the heap after the record failed", kept>>20)
	}

	flat, err := transformtest.Build("jq", map[string]string{"EXPR": ".items[]"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := flat.Process(context.Background(), src, &kgo.Record{Key: []byte("ord-1"), Value: order}, nil); err != nil || len(out) != 5000 {
		t.Fatalf("the order flat-mapped into its items: %d outputs, %v", len(out), err)
	}
}

// The limit counts every output's key and headers besides its value, and
// the whole of it, exactly: outputs of exactly the limit pass, one byte
// more fails. A chain built with MaxOutputBytes hands its limit to jq.
func TestOutputLimitExact(t *testing.T) {
	r := rec(`"` + strings.Repeat("v", 998) + `"`) // 1000 bytes as JSON
	per := transform.Size(r)                       // each of the 3 outputs is r's size
	for _, c := range []struct {
		limit int64
		ok    bool
	}{{3 * per, true}, {3*per - 1, false}, {per, false}} {
		tr := newJQ(t, ". , . , .")
		tr.LimitOutputBytes(c.limit)
		r := rec(string(r.Value))
		out, err := tr.Process(context.Background(), src, r, nil)
		var le *transform.OutputLimitError
		switch {
		case c.ok && (err != nil || len(out) != 3):
			t.Errorf("limit %d: %d outputs, %v; want 3", c.limit, len(out), err)
		case !c.ok && (!errors.As(err, &le) || le.Limit != c.limit || len(out) != 0):
			t.Errorf("limit %d: %d outputs, %v; want an OutputLimitError", c.limit, len(out), err)
		}
	}

	spec, _ := transform.Default.Lookup("jq")
	reg := &transform.Registry{}
	reg.Register("jq", spec)
	lookup := func(_ transform.Entry, setting string) (string, bool) {
		return `[range(300000)] | map(.) | tostring`, setting == "EXPR"
	}
	small, err := reg.Build([]transform.Entry{{Name: "jq"}}, lookup, transform.MaxOutputBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	_, err = small.Process(context.Background(), src, rec(`1`), nil)
	var le *transform.OutputLimitError
	if !errors.As(err, &le) || le.Limit != 1<<20 {
		t.Errorf("a 2MB result under a 1MiB limit: %v", err)
	}
	def, err := reg.Build([]transform.Entry{{Name: "jq"}}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := def.Process(context.Background(), src, rec(`1`), nil); err != nil || len(out) != 1 {
		t.Errorf("a 2MB result under the default limit: %v", err)
	}
}

// One result that is small to gojq but huge as JSON (one large object
// referenced a thousand times) is stopped while it is encoded, before its
// encoding is much longer than the limit.
func TestEncodeStopsAtTheLimit(t *testing.T) {
	tr := newJQ(t, `.items as $i | [range(1000) | $i]`)
	tr.LimitOutputBytes(4 << 20)
	r := &kgo.Record{Value: bigOrder(5000)} // 1MB of items, 1GB encoded 1000 times
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := tr.Process(context.Background(), src, r, nil)
	runtime.ReadMemStats(&after)
	var le *transform.OutputLimitError
	if !errors.As(err, &le) || len(out) != 0 {
		t.Fatalf("got %d outputs, %v; want an OutputLimitError", len(out), err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<20 {
		t.Errorf("encoding allocated %d MiB, want about the 4MiB limit", allocated>>20)
	}
	if cap(tr.fast.enc.buf) > keepBuf {
		t.Errorf("the encoder keeps a %d-byte buffer after the record", cap(tr.fast.enc.buf))
	}
}

// The encoder writes what gojq.Marshal writes, byte for byte.
func TestEncodeLikeGojq(t *testing.T) {
	for _, expr := range []string{
		`.`, `[nan, infinite, -infinite, 1e-7, 1e21, 1e20, 0.1, -0, 1.5e300, 123456789012345678901234567890]`,
		`"\u0000\u0001\u001f\"\\/\b\f\n\r\t<>&\u007f\u2028é😀"`, `[.[]?]`, `{b: 1, a: {d: [], c: {}}, "": null, "é": true}`,
		`[range(10)] | map({(tostring): .})`, `"\(.)" | explode | implode`,
	} {
		p, err := Compile(expr)
		if err != nil {
			t.Fatal(expr, err)
		}
		for _, in := range []string{`{"x": [1, 2.5, "s", null, false], "id": 12345678901234567890}`, `"a\u00ffb"`, `[]`} {
			v, err := ParseValue([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			iter := p.Run(context.Background(), v)
			for {
				r, ok := iter.Next()
				if !ok {
					break
				}
				if _, isErr := r.(error); isErr {
					continue
				}
				compareEncodings(t, r)
			}
		}
	}
	// Bytes that are not UTF-8 reach strings through @base64d.
	compareEncodings(t, "a\xffb\xc3")
	compareEncodings(t, map[string]any{"z\x80": []any{math.Inf(1), 1e-320, int(-5)}})
}

func compareEncodings(t *testing.T, v any) {
	t.Helper()
	want, _ := gojq.Marshal(v)
	var e encoder
	got, err := e.encode(v, math.MaxInt32)
	if err != nil || string(got) != string(want) {
		t.Errorf("encoding %#v: got %q, %v; gojq.Marshal gives %q", v, got, err, want)
	}
}

// FuzzEncode checks the encoder against gojq.Marshal on values made from
// arbitrary JSON.
func FuzzEncode(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5e-9,"\u0000x"],"b":{"c":null}}`))
	f.Add([]byte(`[1e400, -0, 12345678901234567890, "\ud800"]`))
	p, err := Compile(`., (.. | select(type == "string") | @base64 | @base64d)`)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseValue(b)
		if err != nil {
			return
		}
		iter := p.Run(context.Background(), v)
		for {
			r, ok := iter.Next()
			if !ok {
				return
			}
			if _, isErr := r.(error); !isErr {
				compareEncodings(t, r)
			}
		}
	})
}
