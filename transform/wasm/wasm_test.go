package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/transformtest"
)

const (
	misbehave = "testdata/misbehave"
	garbage   = "testdata/garbage"
	uppercase = "../../examples/wasm/uppercase"
	enrich    = "../../examples/wasm/enrich"
)

var testSrc = record.Source{Topic: "orders", Partition: 2, Offset: 42}

// newTest builds a transform on guest pkg with test settings, adjusted by
// opts.
func newTest(t testing.TB, pkg string, opts ...func(*Settings)) *Transform {
	t.Helper()
	s := &Settings{Module: guestPath(t, pkg), MaxMemory: 64 << 20, Timeout: time.Second}
	for _, o := range opts {
		o(s)
	}
	tr, err := newTransform(s, testCache)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Error(err)
		}
	})
	return tr
}

func value(v string) *kgo.Record {
	return &kgo.Record{Key: []byte("k1"), Value: []byte(v), Timestamp: time.UnixMilli(1_700_000_000_123)}
}

func process(tr *Transform, rec *kgo.Record) ([]*kgo.Record, error) {
	return tr.Process(context.Background(), testSrc, rec, nil)
}

// idle returns the pool's idle instances.
func idle(tr *Transform) []*instance {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]*instance(nil), tr.idle...)
}

func TestRegistered(t *testing.T) {
	if _, ok := transform.Default.Lookup("wasm"); !ok {
		t.Fatal(`"wasm" is not registered`)
	}
}

// The guest sees the input's key, value, headers (null values included),
// source and timestamp exactly.
func TestInputRoundTrip(t *testing.T) {
	tr := newTest(t, misbehave)
	rec := value("describe")
	rec.Headers = []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "empty", Value: []byte{}}, {Key: "null"}}
	out, err := process(tr, rec)
	if err != nil {
		t.Fatal(err)
	}
	want := "src=orders/2/42 ts=1700000000123 key=k1 keynil=false hdrs=a:1:false;empty::false;null::true;"
	if len(out) != 1 || string(out[0].Value) != want {
		t.Fatalf("got %q, want %q", values(out), want)
	}
	if out[0] != rec || &out[0].Headers[0] != &rec.Headers[0] || &out[0].Key[0] != &rec.Key[0] {
		t.Error("an unchanged key and headers should be the input's, and the first output the input record")
	}
	if out[0].Headers[2].Value != nil || out[0].Headers[1].Value == nil {
		t.Error("null and empty header values must stay apart")
	}

	rec = value("describe")
	rec.Key = nil
	out, err = process(tr, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out[0].Value), "keynil=true hdrs=") || out[0].Key != nil {
		t.Errorf("a null key: got %q key %q", out[0].Value, out[0].Key)
	}
}

// Many outputs: topics, null keys, new headers, empty and null values.
func TestMultipleOutputs(t *testing.T) {
	tr := newTest(t, misbehave)
	rec := value("multi")
	rec.Headers = []kgo.RecordHeader{{Key: "in", Value: []byte("h")}}
	out, err := process(tr, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("got %d outputs, want 3", len(out))
	}
	if out[0] != rec || string(out[0].Value) != "MULTI" || out[0].Topic != "" || string(out[0].Key) != "k1" || len(out[0].Headers) != 1 {
		t.Errorf("output 0: %+v", out[0])
	}
	o := out[1]
	if o == rec || o.Topic != "side" || o.Key != nil || string(o.Value) != "side" || !o.Timestamp.Equal(rec.Timestamp) {
		t.Errorf("output 1: %+v", o)
	}
	if len(o.Headers) != 2 || o.Headers[0].Key != "h1" || string(o.Headers[0].Value) != "v1" || o.Headers[1].Key != "trace" || string(o.Headers[1].Value) != "multi" {
		t.Errorf("output 1 headers: %+v", o.Headers)
	}
	o = out[2]
	if string(o.Key) != "k3" || o.Value == nil || len(o.Value) != 0 || len(o.Headers) != 1 || o.Headers[0].Key != "nullh" || o.Headers[0].Value != nil {
		t.Errorf("output 2: %+v", o)
	}
	// Output bytes must not alias guest memory: the next call overwrites it.
	if _, err := process(tr, value("multi")); err != nil {
		t.Fatal(err)
	}
	if string(out[1].Value) != "side" || string(out[1].Headers[1].Value) != "multi" || string(out[0].Value) != "MULTI" {
		t.Errorf("outputs changed after the next call: %q", values(out))
	}
}

func TestFilterAndEcho(t *testing.T) {
	tr := newTest(t, misbehave)
	out, err := process(tr, value("filter"))
	if err != nil || len(out) != 0 {
		t.Fatalf("filter: %q, %v", values(out), err)
	}
	rec := value("hello")
	orig := &rec.Value[0]
	out, err = tr.Process(context.Background(), testSrc, rec, make([]*kgo.Record, 1, 4))
	if err != nil || len(out) != 2 || out[1] != rec || &out[1].Value[0] != orig {
		t.Fatalf("echo should append the input record itself, with its own value: %v, %v", out, err)
	}
}

func TestBigOutput(t *testing.T) {
	tr := newTest(t, misbehave)
	for _, n := range []int{0, 10, ownAlloc + 1, 3 << 20} {
		out, err := process(tr, value("big:"+strconv.Itoa(n)))
		if err != nil {
			t.Fatal(err)
		}
		if len(out[0].Value) != n || bytes.Count(out[0].Value, []byte("b")) != n || out[0].Value == nil {
			t.Errorf("big:%d: got %d bytes", n, len(out[0].Value))
		}
	}
	// A big input grows the guest's input buffer.
	rec := value(strings.Repeat("x", 1<<20))
	out, err := process(tr, rec)
	if err != nil || len(out) != 1 || len(out[0].Value) != 1<<20 {
		t.Fatalf("a 1MiB echo: %v", err)
	}
}

// An error the guest returns is a transform error; the instance is kept.
func TestGuestErrors(t *testing.T) {
	tr := newTest(t, misbehave)
	before := idle(tr)
	for v, want := range map[string]string{
		"error":        "wasm guest failed: bad order",
		"panic":        "wasm guest failed: panic: boom",
		"stderr-panic": "wasm guest failed: panic: assignment to entry in nil map",
		"long-error":   "wasm guest failed: " + strings.Repeat("x", maxGuestMessage) + "...",
		"bad-topic":    `output record 0 names topic "not a topic": want a topic name`,
		"loopback":     `output record 0 names its input topic "orders"`,
	} {
		rec := value(v)
		out, err := process(tr, rec)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want an error starting %q", v, err, want)
		}
		if len(out) != 0 || string(rec.Value) != v {
			t.Errorf("%s: a failed record must produce nothing and stay as it was: %q", v, values(out))
		}
	}
	if after := idle(tr); len(after) != 1 || after[0] != before[0] {
		t.Error("a guest-reported error must not replace the instance")
	}
	if !errors.Is(mustFail(t, tr, "error"), ErrGuest) {
		t.Error("want ErrGuest")
	}
}

func mustFail(t *testing.T, tr *Transform, v string) error {
	t.Helper()
	_, err := process(tr, value(v))
	if err == nil {
		t.Fatalf("%s: want an error", v)
	}
	return err
}

// Each bad guest fails its record cleanly, its instance is replaced, and
// the next record works.
func TestBadGuests(t *testing.T) {
	cases := []struct {
		guest, value string
		want         error
		msg          string
	}{
		{misbehave, "trap", ErrTrap, "out of bounds memory access"},
		{misbehave, "exit", ErrTrap, "exited with code 3"},
		{misbehave, "loop", ErrTimeout, "PROCESSOR_WASM_TIMEOUT=200ms"},
		{misbehave, "grow", ErrTrap, "fatal error: out of memory)"},
		{garbage, "result-outside", ErrBadOutput, "the result (16 bytes at 4294967040) is outside"},
		{garbage, "status", ErrBadOutput, "unknown status 7"},
		{garbage, "count", ErrBadOutput, "more than the 1048576 allowed"},
		{garbage, "many", ErrBadOutput, "the record table"},
		{garbage, "table-outside", ErrBadOutput, "the record table"},
		{garbage, "key-length", ErrBadOutput, "a key has length -5"},
		{garbage, "value-outside", ErrBadOutput, "a value"},
		{garbage, "header-outside", ErrBadOutput, "a header key"},
		{garbage, "null-header-key", ErrBadOutput, "a header key is null"},
		{garbage, "message-outside", ErrBadOutput, "the error message"},
	}
	// Running out of memory takes a Go guest a while (its runtime prints
	// a goroutine dump), so only the loop gets a short deadline.
	trs := map[string]*Transform{
		misbehave: newTest(t, misbehave, func(s *Settings) { s.Timeout = 5 * time.Second }),
		garbage:   newTest(t, garbage),
		"loop":    newTest(t, misbehave, func(s *Settings) { s.Timeout = 200 * time.Millisecond }),
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.guest)+"/"+c.value, func(t *testing.T) {
			tr := trs[c.guest]
			if c.value == "loop" {
				tr = trs["loop"]
			}
			before := idle(tr)
			start := time.Now()
			rec := value(c.value)
			out, err := process(tr, rec)
			var msg *settings.Message // named as the processor names the settings of the entry wasm
			if errors.As(err, &msg) {
				msg.Name = func(s string) string { return "PROCESSOR_WASM_" + s }
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v containing %q", err, c.want, c.msg)
			}
			t.Log(err)
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error spans lines: %q", err)
			}
			if len(out) != 0 || string(rec.Value) != c.value {
				t.Errorf("a failed record must produce nothing and stay as it was")
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("failing took %s", el)
			}
			if after := idle(tr); len(after) != 0 {
				t.Errorf("the failed instance went back to the pool (%d idle, was %d)", len(after), len(before))
			}
			// The next record gets a fresh instance and works.
			out, err = process(tr, value("ok"))
			if err != nil || len(out) != 1 || string(out[0].Value) != "ok" {
				t.Fatalf("the record after: %q, %v", values(out), err)
			}
		})
	}
	// The garbage guest's own error report is an ordinary guest error.
	if err := mustFail(t, trs[garbage], "error"); !errors.Is(err, ErrGuest) || !strings.Contains(err.Error(), "garbage guest error") {
		t.Errorf("garbage error: %v", err)
	}
}

// Without a deadline (PROCESSOR_WASM_TIMEOUT=0) records still work.
func TestNoDeadline(t *testing.T) {
	tr := newTest(t, uppercase, func(s *Settings) { s.Timeout = 0 })
	out, err := process(tr, value("abc"))
	if err != nil || string(out[0].Value) != "ABC" {
		t.Fatalf("%q, %v", values(out), err)
	}
}

func TestSandbox(t *testing.T) {
	tr := newTest(t, misbehave)
	out, err := process(tr, value("fs"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out[0].Value); !strings.HasPrefix(got, "err=open /etc/hostname:") || !strings.HasSuffix(got, " env=0 args=0") {
		t.Errorf("the guest reached the filesystem, environment or arguments: %s", got)
	}

	clock := func(tr *Transform) time.Time {
		out, err := process(tr, value("clock"))
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := strconv.ParseInt(string(out[0].Value), 10, 64)
		return time.UnixMilli(ms)
	}
	if got := clock(tr); got.Year() != 2022 {
		t.Errorf("without PROCESSOR_WASM_ALLOW_CLOCK the guest's clock reads %s, want wazero's fake 2022-01-01", got)
	}
	real := newTest(t, misbehave, func(s *Settings) { s.AllowClock = true })
	if got := clock(real); time.Since(got).Abs() > time.Minute {
		t.Errorf("with PROCESSOR_WASM_ALLOW_CLOCK the guest's clock reads %s", got)
	}
}

func TestUppercase(t *testing.T) {
	tr := newTest(t, uppercase)
	for in, want := range map[string]string{
		"":                              "",
		"abc":                           "ABC",
		"Hello, World! {\"a\":1} z@[`{": "HELLO, WORLD! {\"A\":1} Z@[`{",
		strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 9): strings.Repeat("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 9),
		"grüße, ßtraße": strings.ToUpper("grüße, ßtraße"),
	} {
		rec := value(in)
		rec.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}
		out, err := process(tr, rec)
		if err != nil || len(out) != 1 || string(out[0].Value) != want {
			t.Errorf("%q: got %q, %v; want %q", in, values(out), err, want)
			continue
		}
		if string(out[0].Key) != "k1" || len(out[0].Headers) != 1 || out[0].Headers[0].Key != "h" {
			t.Errorf("%q: key or headers changed: %+v", in, out[0])
		}
	}
}

// The pool hands each concurrent caller its own instance.
func TestConcurrentCallers(t *testing.T) {
	tr := newTest(t, uppercase)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				v := fmt.Sprintf("g%d-record-%d", g, i)
				out, err := tr.Process(context.Background(), testSrc, value(v), nil)
				if err != nil || len(out) != 1 || string(out[0].Value) != strings.ToUpper(v) {
					errs <- fmt.Errorf("%s: %q, %v", v, values(out), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(idle(tr)); n < 1 || n > maxIdle {
		t.Errorf("%d idle instances, want 1 to %d", n, maxIdle)
	}
}

func TestClose(t *testing.T) {
	tr, err := newTransform(&Settings{Module: guestPath(t, uppercase), MaxMemory: 64 << 20, Timeout: time.Second}, testCache)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := process(tr, value("x")); err == nil {
		t.Error("Process after Close should fail")
	}
}

// Settings that cannot work are configuration errors naming the variable,
// on one line.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	notWasm := filepath.Join(dir, "not.wasm")
	if err := os.WriteFile(notWasm, []byte("not a module"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := func(s *Settings) {
		s.Module, s.MaxMemory, s.Timeout = guestPath(t, uppercase), 64<<20, time.Second
	}
	cases := []struct {
		name string
		set  func(*Settings)
		want string
	}{
		{"unset", func(s *Settings) { ok(s); s.Module = "" }, "setting MODULE is not set"},
		{"missing", func(s *Settings) { ok(s); s.Module = filepath.Join(dir, "nope.wasm") }, `setting MODULE="` + filepath.Join(dir, "nope.wasm") + `" is invalid: want a readable WebAssembly module file (open `},
		{"not wasm", func(s *Settings) { ok(s); s.Module = notWasm }, "is invalid: want a valid WebAssembly module ("},
		{"command", func(s *Settings) { ok(s); s.Module = guestPathWith(t, uppercase) }, "it is a WASI command (it exports _start, not _initialize); build a Go plugin as a reactor with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared"},
		{"abi 2", func(s *Settings) {
			ok(s)
			s.Module = guestPathWith(t, garbage, "-buildmode=c-shared", "-ldflags=-X main.version=2")
		}, "want a module implementing the processor's wasm ABI version 1 (it implements version 2)"},
		{"memory too small", func(s *Settings) { ok(s); s.MaxMemory = 1 << 20 }, `setting MAX_MEMORY="1MiB" is invalid: want`},
		{"memory out of range", func(s *Settings) { ok(s); s.MaxMemory = 5 << 30 }, `setting MAX_MEMORY="5GiB" is invalid: want a size from 1MiB to 4GiB`},
		{"timeout", func(s *Settings) { ok(s); s.Timeout = time.Microsecond }, `setting TIMEOUT="1µs" is invalid: want a Go duration from 1ms to 1m`},
		{"negative timeout", func(s *Settings) { ok(s); s.Timeout = -time.Second }, `setting TIMEOUT="-1s" is invalid`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Settings{}
			c.set(s)
			_, err := transformtest.Build("wasm", map[string]string{"MODULE": s.Module, "MAX_MEMORY": s.MaxMemory.String(),
				"TIMEOUT": s.Timeout.String(), "ALLOW_CLOCK": strconv.FormatBool(s.AllowClock)})
			var se *settings.Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v (%T), want a *settings.Error", err, err)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %q, want one line containing %q", err, c.want)
			}
		})
	}
}

// The settings' defaults, and a value that does not parse.
func TestSettingsDeclared(t *testing.T) {
	spec, ok := transform.Default.Lookup("wasm")
	if !ok {
		t.Fatal(`"wasm" is not registered`)
	}
	defaults := map[string]string{}
	for _, f := range spec.Fields() {
		defaults[f.Name] = f.Default
	}
	if want := map[string]string{"MODULE": "", "MAX_MEMORY": "64MiB", "TIMEOUT": "100ms", "ALLOW_CLOCK": "false", "STORES": "", "EMIT_STORES": "", "STATE_BY_KEY": "false",
		"TABLES": "", "TABLE_MODE": "co_partitioned"}; !maps.Equal(defaults, want) {
		t.Errorf("defaults %v, want %v", defaults, want)
	}
	_, err := transformtest.Build("wasm", map[string]string{"MODULE": "x.wasm", "MAX_MEMORY": "lots"})
	var se *settings.Error
	if !errors.As(err, &se) || se.Field != "MAX_MEMORY" || se.Value != "lots" || !strings.Contains(err.Error(), "want a size from 1MiB to 4GiB") {
		t.Errorf("got %v", err)
	}
}

func values(recs []*kgo.Record) []string {
	var vs []string
	for _, r := range recs {
		vs = append(vs, string(r.Value))
	}
	return vs
}
