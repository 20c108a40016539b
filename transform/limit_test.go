package transform_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/identity"
)

// fanRegistry has "split", which turns a record into 100 new records of
// 10KiB (1MiB in all, each call well under any limit), and "copy", which
// turns each record into 10 new ones with copies of its value, counting
// its calls.
func fanRegistry(calls *int) *transform.Registry {
	r := &transform.Registry{}
	r.Register("split", fn(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		for range 100 {
			out = append(out, &kgo.Record{Key: rec.Key, Value: bytes.Repeat([]byte("s"), 10<<10)})
		}
		return out, nil
	}))
	r.Register("copy", fn(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		*calls++
		for range 10 {
			out = append(out, &kgo.Record{Key: rec.Key, Value: bytes.Clone(rec.Value), Headers: rec.Headers})
		}
		return out, nil
	}))
	return r
}

// A chain whose stages each multiply records, each call's outputs far
// below the limit, fails the record at the stage whose outputs for it
// pass the limit, added up over its calls: as soon as they do, not after
// the stage has run on every input. The error is a permanent *Error
// naming the stage and the limit, and nothing is appended to out.
func TestChainFanOutStopsAtTheLimit(t *testing.T) {
	var calls int
	reg := fanRegistry(&calls)
	const limit = 4 << 20
	c, err := reg.Build(entries(t, "split", "copy", "copy@again"), nil, transform.MaxOutputBytes(limit), transform.WithNames(hostNames))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*kgo.Record, 1, 8) // the caller's record before ours stays
	res, err := c.Process(context.Background(), record.Source{}, rec("order"), out)
	var te *transform.Error
	var le *transform.OutputLimitError
	if !errors.As(err, &te) || te.Stage != "copy" || !errors.As(err, &le) || transform.IsRetriable(err) {
		t.Fatalf("got %v, want a permanent *transform.Error of stage copy wrapping an *OutputLimitError", err)
	}
	if le.Limit != limit || le.Bytes <= limit || le.Bytes > limit+10*(10<<10+transform.RecordOverhead) {
		t.Errorf("the error reports %d bytes against %d, want just past the limit", le.Bytes, le.Limit)
	}
	// Each copy call adds 10 records of 10KiB: the limit is passed on
	// the 41st of the 100 inputs.
	if calls != 41 || le.Records != 410 {
		t.Errorf("copy ran %d times (%d records), want it stopped at the 41st call (410 records)", calls, le.Records)
	}
	if want := "transform copy: the outputs of one input record passed PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD=4MiB (410 records, at least"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %q, want it to start %q", err, want)
	}
	if len(res) != 1 {
		t.Errorf("a failed record left %d records in out, want the 1 it was given", len(res))
	}

	// Within the limit the same chain works: 1MiB, then 10MiB.
	calls = 0
	c, err = reg.Build(entries(t, "split", "copy"), nil, transform.MaxOutputBytes(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Process(context.Background(), record.Source{}, rec("order"), nil); err != nil || len(res) != 1000 {
		t.Fatalf("10MiB of outputs under 16MiB: %d outputs, %v", len(res), err)
	}
	// The last stage's outputs count too, and without the option the
	// limit is the default.
	c, err = reg.Build(entries(t, "split", "copy", "copy@again"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Process(context.Background(), record.Source{}, rec("order"), nil); !errors.As(err, &le) || le.Limit != transform.DefaultMaxOutputBytes || !strings.Contains(err.Error(), "transform copy@again:") {
		t.Fatalf("100MiB at the last stage under the default limit: %v", err)
	}
}

// One stage alone is measured too; outputs of exactly the limit pass,
// Size counts keys, values, headers and the records' own memory.
func TestChainOneStageLimit(t *testing.T) {
	r := &transform.Registry{}
	r.Register("three", fn(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		for range 3 {
			out = append(out, &kgo.Record{Key: []byte("kk"), Value: rec.Value, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("vv")}}})
		}
		return out, nil
	}))
	one := transform.Size(&kgo.Record{Key: []byte("kk"), Value: make([]byte, 1<<20), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("vv")}}})
	if want := int64(2+1<<20+1+2) + transform.RecordOverhead + transform.HeaderOverhead; one != want {
		t.Fatalf("Size = %d, want %d", one, want)
	}
	for _, c := range []struct {
		limit int64
		ok    bool
	}{{3 * one, true}, {3*one - 1, false}} {
		ch, err := r.Build(entries(t, "three"), nil, transform.MaxOutputBytes(c.limit))
		if err != nil {
			t.Fatal(err)
		}
		out, err := ch.Process(context.Background(), record.Source{}, &kgo.Record{Value: make([]byte, 1<<20)}, nil)
		var le *transform.OutputLimitError
		switch {
		case c.ok && (err != nil || len(out) != 3):
			t.Errorf("limit %d: %d outputs, %v; want 3", c.limit, len(out), err)
		case !c.ok && (!errors.As(err, &le) || le.Bytes != 3*one || le.Records != 3 || len(out) != 0):
			t.Errorf("limit %d: %d outputs, %v; want an OutputLimitError for %d bytes", c.limit, len(out), err, 3*one)
		}
	}
}

// limited records the limit the chain gives it.
type limited struct{ n int64 }

func (l *limited) LimitOutputBytes(n int64) { l.n = n }
func (l *limited) Process(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, rec), nil
}

// Build tells every stage implementing OutputLimiter the chain's limit,
// the default when none is given.
func TestBuildTellsStagesTheLimit(t *testing.T) {
	var made []*limited
	r := &transform.Registry{}
	r.Register("limited", transform.Plain("test stage", func() (transform.Transform, error) {
		l := &limited{}
		made = append(made, l)
		return l, nil
	}))
	if _, err := r.Build(entries(t, "limited", "limited@b"), nil, transform.MaxOutputBytes(3<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Build(entries(t, "limited"), nil); err != nil {
		t.Fatal(err)
	}
	if len(made) != 3 || made[0].n != 3<<20 || made[1].n != 3<<20 || made[2].n != transform.DefaultMaxOutputBytes {
		t.Errorf("the stages were told %v, want 3MiB, 3MiB and the default", []int64{made[0].n, made[1].n, made[2].n})
	}
}

// The chain does not keep a record's intermediate outputs (up to the
// limit's worth) alive after Process returns, whether the record passed
// or failed.
func TestChainLetsGoOfIntermediates(t *testing.T) {
	var seen []weak.Pointer[kgo.Record]
	r := &transform.Registry{}
	r.Register("split", fn(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		for range 4 {
			o := &kgo.Record{Value: make([]byte, 1<<20)}
			seen = append(seen, weak.Make(o))
			out = append(out, o)
		}
		return out, nil
	}))
	r.Register("fail", fn(failing))
	r.Register("drop", fn(filter))
	for _, names := range [][]string{{"split", "drop"}, {"split", "fail"}, {"split", "split@b", "drop"}} {
		seen = nil
		c := build(t, r, names...)
		_, _ = c.Process(context.Background(), record.Source{}, rec("in"), nil)
		runtime.GC()
		for i, w := range seen {
			if w.Value() != nil {
				t.Errorf("%v: intermediate record %d of %d is still alive after Process", names, i, len(seen))
				break
			}
		}
		runtime.KeepAlive(c)
	}
}

// Bytes counts the key, the value and every header's key and value.
func TestBytes(t *testing.T) {
	r := &kgo.Record{Key: []byte("kk"), Value: []byte("vvvvvvv"), Headers: []kgo.RecordHeader{
		{Key: "a", Value: []byte("12345")}, {Key: "bbb", Value: nil},
	}}
	if got := transform.Bytes(r); got != 2+7+1+5+3 {
		t.Errorf("Bytes = %d, want %d", got, 2+7+1+5+3)
	}
	if got := transform.Bytes(&kgo.Record{}); got != 0 {
		t.Errorf("Bytes of an empty record = %d", got)
	}
}

// hostNames name the limit as the processor does.
var hostNames = transform.Names{Limit: "PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD"}

// Without Names, the limit's error says "the limit".
func TestOutputLimitErrorWithoutNames(t *testing.T) {
	e := &transform.OutputLimitError{Limit: 4 << 20, Bytes: 5 << 20, Records: 3}
	if got, want := e.Error(), "the outputs of one input record passed the limit of 4MiB (3 records, at least 5242880 bytes)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e.Setting = "LIMIT"
	if got, want := e.Error(), "the outputs of one input record passed LIMIT=4MiB (3 records, at least 5242880 bytes)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Fits is Process's answer for a pass-through chain, one identity stage
// or two: a record fits exactly when Process returns it alone, and fails
// with an *OutputLimitError otherwise, on either side of the limit and
// on it, with and without headers.
func TestChainFitsAsProcessDoes(t *testing.T) {
	reg := &transform.Registry{}
	reg.Register("identity", transform.Plain("", func() (transform.Transform, error) { return identity.Transform{}, nil }))
	base := transform.RecordOverhead
	for _, entries := range [][]transform.Entry{{{Name: "identity"}}, {{Name: "identity"}, {Name: "identity", Alias: "again"}}} {
		for _, limit := range []int64{base + 10, base + transform.HeaderOverhead + 40} {
			c, err := reg.Build(entries, nil, transform.MaxOutputBytes(limit))
			if err != nil {
				t.Fatal(err)
			}
			if !c.PassThrough() {
				t.Fatalf("%v does not pass through", entries)
			}
			for value := 0; value <= 50; value++ {
				for _, hs := range [][]kgo.RecordHeader{nil, {{Key: "h", Value: []byte("v")}}} {
					r := &kgo.Record{Key: []byte("k"), Value: make([]byte, value), Headers: hs}
					out, err := c.Process(context.Background(), transform.Source{}, r, nil)
					var le *transform.OutputLimitError
					processed := err == nil && len(out) == 1 && out[0] == r
					if !processed && !errors.As(err, &le) {
						t.Fatalf("%v, limit %d, value %d B: Process returned %v, %v", entries, limit, value, out, err)
					}
					if got := c.Fits(r); got != processed {
						t.Errorf("%v, limit %d, value %d B, %d headers: Fits %v, Process returned the record alone %v", entries, limit, value, len(hs), got, processed)
					}
				}
			}
		}
	}
}
