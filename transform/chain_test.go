package transform_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

var errBoom = errors.New("boom")

// fn wraps a function as a Plain spec.
func fn(f transform.Func) transform.Spec {
	return transform.Plain("test stage", func() (transform.Transform, error) { return f, nil })
}

// filter drops every record.
func filter(_ context.Context, _ record.Source, _ *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return out, nil
}

// fanOut3 replaces a record by three new ones, values <v>.0 to <v>.2.
func fanOut3(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	for i := range 3 {
		out = append(out, &kgo.Record{Key: rec.Key, Value: fmt.Appendf(nil, "%s.%d", rec.Value, i)})
	}
	return out, nil
}

// tag appends "!" to the value in place and passes the record on.
func tag(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	rec.Value = append(rec.Value, '!')
	return append(out, rec), nil
}

func failing(_ context.Context, _ record.Source, _ *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return out, errBoom
}

// failingNil returns a nil slice with its error, as much Go code does.
func failingNil(context.Context, record.Source, *kgo.Record, []*kgo.Record) ([]*kgo.Record, error) {
	return nil, errBoom
}

// failingAfterAppend appends the record and fails anyway.
func failingAfterAppend(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, rec, rec), errBoom
}

// failingOnSecond passes records on until it sees one whose value ends in
// ".1" (the second output of fanOut3).
func failingOnSecond(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	if strings.HasSuffix(string(rec.Value), ".1") {
		return out, errBoom
	}
	return append(out, rec), nil
}

// panicking panics on records whose value is "bad".
func panicking(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	if string(rec.Value) == "bad" {
		panic("bad record")
	}
	return append(out, rec), nil
}

// seen records what one stage was called with.
type seen struct {
	recs []*kgo.Record
	vals []string
	srcs []record.Source
	ctxs []context.Context
}

func (s *seen) spec() transform.Spec {
	return fn(func(ctx context.Context, src record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		s.recs = append(s.recs, rec)
		s.vals = append(s.vals, string(rec.Value))
		s.srcs = append(s.srcs, src)
		s.ctxs = append(s.ctxs, ctx)
		return append(out, rec), nil
	})
}

// closer is a stage that implements io.Closer and logs its closing.
type closer struct {
	name string
	log  *[]string
	err  error
}

func (c *closer) Process(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, rec), nil
}

func (c *closer) Close() error {
	*c.log = append(*c.log, c.name)
	return c.err
}

var _ io.Closer = (*closer)(nil)

// closerSpec registers a closer named by its NAME setting, which
// closerLookup sets to its entry; its Close fails with errs[name].
type closerSettings struct {
	Name string `setting:"NAME" doc:"the closer's name" form:"any string"`
}

func closerSpec(log *[]string, errs map[string]error) transform.Spec {
	return transform.Typed("closes", func(s *closerSettings) (transform.Transform, error) {
		return &closer{name: s.Name, log: log, err: errs[s.Name]}, nil
	})
}

// closerLookup names each closer after its entry.
func closerLookup(e transform.Entry, setting string) (string, bool) {
	return e.String(), setting == "NAME"
}

// testRegistry returns a registry with the stages above.
func testRegistry() *transform.Registry {
	r := &transform.Registry{}
	r.Register("identity", fn(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, rec), nil
	}))
	r.Register("filter", fn(filter))
	r.Register("fanout", fn(fanOut3))
	r.Register("tag", fn(tag))
	r.Register("fail", fn(failing))
	r.Register("failnil", fn(failingNil))
	r.Register("failappend", fn(failingAfterAppend))
	r.Register("failsecond", fn(failingOnSecond))
	r.Register("panic", fn(panicking))
	return r
}

func entries(t testing.TB, names ...string) []transform.Entry {
	t.Helper()
	es := make([]transform.Entry, len(names))
	for i, n := range names {
		e, err := transform.ParseEntry(n)
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	return es
}

func build(t testing.TB, r *transform.Registry, names ...string) *transform.Chain {
	t.Helper()
	c, err := r.Build(entries(t, names...), nil)
	if err != nil {
		t.Fatalf("Build(%q): %v", names, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func values(recs []*kgo.Record) []string {
	vs := make([]string, len(recs))
	for i, r := range recs {
		vs[i] = string(r.Value)
	}
	return vs
}

func rec(v string) *kgo.Record { return &kgo.Record{Value: []byte(v)} }

func TestBuildErrors(t *testing.T) {
	r := testRegistry()
	t.Run("empty chain", func(t *testing.T) {
		for _, es := range [][]transform.Entry{nil, {}} {
			if c, err := r.Build(es, nil); err == nil || c != nil || !strings.Contains(err.Error(), "empty") {
				t.Errorf("Build(%v) = %v, %v; want an empty-chain error", es, c, err)
			}
		}
	})
	t.Run("unknown name", func(t *testing.T) {
		c, err := r.Build(entries(t, "identity", "nope@x"), nil)
		var ue *transform.UnknownError
		if !errors.As(err, &ue) || c != nil {
			t.Fatalf("Build = %v, %v; want an *UnknownError", c, err)
		}
		if ue.Name != "nope" {
			t.Errorf("Name = %q, want nope", ue.Name)
		}
		if !reflect.DeepEqual(ue.Known, r.Names()) {
			t.Errorf("Known = %q, want %q", ue.Known, r.Names())
		}
		for _, n := range r.Names() {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("message %q does not list %s", err, n)
			}
		}
	})
	for _, names := range [][]string{{"tag", "tag"}, {"tag", "identity", "tag"}, {"tag@x", "tag@x"}} {
		t.Run("duplicate "+strings.Join(names, ","), func(t *testing.T) {
			c, err := r.Build(entries(t, names...), nil)
			if err == nil || c != nil {
				t.Fatalf("Build(%q) = %v, %v; want an error", names, c, err)
			}
			dup := names[len(names)-1]
			want := fmt.Sprintf("transform %s appears twice; give one an alias, e.g. tag@second", dup)
			if err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
		})
	}
	t.Run("an alias distinguishes", func(t *testing.T) {
		c := build(t, r, "tag", "tag@again", "identity")
		if c.Len() != 3 {
			t.Errorf("Len = %d, want 3", c.Len())
		}
	})
}

type suffixSettings struct {
	Suffix string `setting:"SUFFIX" doc:"appended to every value" form:"any string"`
}

// Each entry gets a settings struct of its own, filled from lookup for that
// entry (aliases included); a transform without settings is not asked.
func TestBuildAliasesGetTheirOwnSettings(t *testing.T) {
	r := &transform.Registry{}
	var built []*suffixSettings
	r.Register("suffix", transform.Typed("appends SUFFIX", func(s *suffixSettings) (transform.Transform, error) {
		built = append(built, s)
		return transform.Func(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			rec.Value = append(rec.Value, s.Suffix...)
			return append(out, rec), nil
		}), nil
	}))
	r.Register("plain", fn(tag))

	var asked []transform.Entry
	es := entries(t, "suffix@first", "plain", "suffix@second", "suffix")
	c, err := r.Build(es, func(e transform.Entry, setting string) (string, bool) {
		if setting != "SUFFIX" {
			t.Errorf("lookup(%v, %q): not a declared setting", e, setting)
		}
		asked = append(asked, e)
		if e.Alias == "" {
			return "-bare", true
		}
		return "-" + e.Alias, true
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEntries := []transform.Entry{es[0], es[2], es[3]}
	if !reflect.DeepEqual(asked, wantEntries) {
		t.Errorf("lookup asked for %v, want %v", asked, wantEntries)
	}
	for i := range built {
		for j := range i {
			if built[i] == built[j] {
				t.Errorf("entries %v and %v share one settings struct", wantEntries[j], wantEntries[i])
			}
		}
	}
	out, err := c.Process(context.Background(), record.Source{}, rec("v"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(out); !reflect.DeepEqual(got, []string{"v-first!-second-bare"}) {
		t.Errorf("values = %q", got)
	}
}

// A setting that does not parse is a *SettingError naming the entry, the
// setting, the value and the field's form; the stages built before it are
// closed.
func TestBuildSettingErrorNamesTheEntry(t *testing.T) {
	type numSettings struct {
		N int `setting:"N" default:"3" doc:"a number" form:"a whole number such as 3"`
	}
	var log []string
	r := &transform.Registry{}
	r.Register("c", closerSpec(&log, nil))
	r.Register("num", transform.Typed("takes N", func(*numSettings) (transform.Transform, error) { return fn(tag).New(nil) }))
	_, err := r.Build(entries(t, "c@a", "num@b"), func(e transform.Entry, setting string) (string, bool) {
		if e.Name == "num" {
			return "three", true
		}
		return closerLookup(e, setting)
	})
	var se *settings.Error
	if !errors.As(err, &se) || se.Plugin != (settings.Plugin{Kind: "transform", Name: "num", Alias: "b"}) || se.Field != "N" || se.Value != "three" ||
		se.Want.String() != "a whole number such as 3" || se.Unset {
		t.Fatalf("error = %#v, want a *settings.Error for num@b's N", err)
	}
	if want := `transform num@b: setting N="three" is invalid: want a whole number such as 3`; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if !reflect.DeepEqual(log, []string{"c@a"}) {
		t.Errorf("closed %q, want [c@a]", log)
	}
}

func TestBuildNewErrorWrapped(t *testing.T) {
	r := &transform.Registry{}
	newErr := errors.New("bad filter")
	r.Register("bad", transform.Typed("fails", func(*suffixSettings) (transform.Transform, error) { return nil, newErr }))
	r.Register("badplain", transform.Plain("fails", func() (transform.Transform, error) { return nil, newErr }))
	for _, name := range []string{"bad", "bad@x", "badplain"} {
		_, err := r.Build(entries(t, name), nil)
		if !errors.Is(err, newErr) {
			t.Errorf("Build(%s) error %v does not wrap the New error", name, err)
		}
		if want := "transform " + name + ": bad filter"; err == nil || err.Error() != want {
			t.Errorf("Build(%s) error = %v, want %q", name, err, want)
		}
	}
}

func TestBuildClosesBuiltStagesOnFailure(t *testing.T) {
	tests := []struct {
		name   string
		last   string
		lookup transform.Lookup
	}{
		{"unknown transform", "nope", closerLookup},
		{"New fails", "bad", closerLookup},
		{"duplicate entry", "c@a", closerLookup},
		{"a setting does not parse", "num", func(e transform.Entry, setting string) (string, bool) {
			if e.Name == "num" {
				return "many", true
			}
			return closerLookup(e, setting)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log []string
			r := &transform.Registry{}
			r.Register("c", closerSpec(&log, nil))
			r.Register("plain", fn(tag))
			r.Register("bad", transform.Plain("fails", func() (transform.Transform, error) { return nil, errBoom }))
			r.Register("num", transform.Typed("takes N", func(*struct {
				N int `setting:"N" doc:"a number" form:"a whole number"`
			}) (transform.Transform, error) {
				return fn(tag).New(nil)
			}))
			c, err := r.Build(entries(t, "c@a", "plain", "c@b", "c", tt.last), tt.lookup)
			if err == nil || c != nil {
				t.Fatalf("Build = %v, %v; want an error", c, err)
			}
			if want := []string{"c", "c@b", "c@a"}; !reflect.DeepEqual(log, want) {
				t.Errorf("closed %q, want %q (reverse order, each once)", log, want)
			}
		})
	}
}

func TestBuildNilConfigureWithoutSettings(t *testing.T) {
	c, err := transform.Default.Build(entries(t, "identity"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 1 {
		t.Errorf("Len = %d", c.Len())
	}
}

func TestProcessIdentitySamePointer(t *testing.T) {
	for _, names := range [][]string{{"identity"}, {"identity", "identity@b", "identity@c"}} {
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			c := build(t, transform.Default, names...)
			pre := []*kgo.Record{rec("p0"), rec("p1")}
			in := rec("v")
			out, err := c.Process(context.Background(), record.Source{}, in, append([]*kgo.Record(nil), pre...))
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 3 || out[0] != pre[0] || out[1] != pre[1] || out[2] != in {
				t.Errorf("out = %v, want the pre-filled records then the input pointer", values(out))
			}
		})
	}
}

func TestProcessFilter(t *testing.T) {
	tests := []struct {
		names      []string
		stageCalls int // calls to the recording stage per record; -1 for none
	}{
		{[]string{"filter"}, -1},
		{[]string{"filter", "rec"}, 0},
		{[]string{"rec", "filter"}, 1},
		{[]string{"identity", "filter", "rec"}, 0},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.names, ","), func(t *testing.T) {
			var s seen
			r := testRegistry()
			r.Register("rec", s.spec())
			c := build(t, r, tt.names...)
			pre := rec("pre")
			for i := range 3 { // and again, with the buffers reused
				out, err := c.Process(context.Background(), record.Source{}, rec("v"), []*kgo.Record{pre})
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != 1 || out[0] != pre {
					t.Errorf("record %d: out = %q, want only the pre-filled record", i, values(out))
				}
			}
			if tt.stageCalls >= 0 && len(s.recs) != 3*tt.stageCalls {
				t.Errorf("recording stage called %d times, want %d", len(s.recs), 3*tt.stageCalls)
			}
		})
	}
}

func TestProcessFlatMap(t *testing.T) {
	var second, third seen
	r := testRegistry()
	r.Register("second", second.spec())
	r.Register("third", third.spec())
	c := build(t, r, "fanout", "second", "tag", "third")
	out, err := c.Process(context.Background(), record.Source{}, rec("v"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"v.0", "v.1", "v.2"}
	if !reflect.DeepEqual(second.vals, want) {
		t.Errorf("second stage saw %q, want %q", second.vals, want)
	}
	if !reflect.DeepEqual(third.vals, []string{"v.0!", "v.1!", "v.2!"}) {
		t.Errorf("third stage saw %q", third.vals)
	}
	if !reflect.DeepEqual(out, third.recs) {
		t.Errorf("out is not what the last stage appended")
	}
	if !reflect.DeepEqual(second.recs, third.recs) {
		t.Errorf("tag did not pass the same records on")
	}

	// Two fan-outs in a row: 9 records.
	c2 := build(t, r, "fanout", "fanout@again")
	out, err = c2.Process(context.Background(), record.Source{}, rec("w"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(out); len(got) != 9 || got[0] != "w.0.0" || got[8] != "w.2.2" {
		t.Errorf("values = %q", got)
	}
}

// TestProcessManyRecords runs records with varying fan-out through chains
// that reuse their buffers, and compares with the outputs computed directly.
func TestProcessManyRecords(t *testing.T) {
	r := &transform.Registry{}
	// explode emits n copies of a record whose value is n, with values n.i.
	explode := func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		n := int(rec.Value[0] - '0')
		for i := range n {
			out = append(out, &kgo.Record{Value: fmt.Appendf(nil, "%d%s.%d", i%4, rec.Value[1:], i)})
		}
		return out, nil
	}
	// dropEven drops records whose last digit is even.
	dropEven := func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		if (rec.Value[len(rec.Value)-1]-'0')%2 == 0 {
			return out, nil
		}
		return append(out, rec), nil
	}
	r.Register("explode", fn(explode))
	r.Register("drop", fn(dropEven))
	r.Register("tag", fn(tag))

	// expected runs the stages naively.
	stages := map[string]transform.Func{"explode": explode, "drop": dropEven, "tag": tag}
	expected := func(names []string, v string) []string {
		recs := []*kgo.Record{rec(v)}
		for _, n := range names {
			name, _, _ := strings.Cut(n, "@")
			var next []*kgo.Record
			for _, r := range recs {
				next, _ = stages[name](context.Background(), record.Source{}, r, next)
			}
			recs = next
		}
		return values(recs)
	}
	for _, names := range [][]string{
		{"explode", "tag"},
		{"explode", "drop", "tag"},
		{"explode", "explode@b", "drop", "tag"},
		{"tag", "explode", "tag@b", "explode@b", "drop"},
	} {
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			c := build(t, r, names...)
			var out []*kgo.Record
			for i := range 200 {
				v := fmt.Sprintf("%d-%d", i%6, i)
				pre := len(out)
				var err error
				out, err = c.Process(context.Background(), record.Source{Offset: int64(i)}, rec(v), out)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := values(out[pre:]), expected(names, v); !reflect.DeepEqual(got, want) && (len(got) != 0 || len(want) != 0) {
					t.Fatalf("record %d: got %q, want %q", i, got, want)
				}
				if i%7 == 0 {
					out = out[:0]
				}
			}
		})
	}
}

func TestProcessErrors(t *testing.T) {
	tests := []struct {
		names     []string
		wantStage string
	}{
		{[]string{"fail"}, "fail"},
		{[]string{"fail@x"}, "fail@x"},
		{[]string{"failnil"}, "failnil"},
		{[]string{"failappend"}, "failappend"},
		{[]string{"fail", "identity", "identity@b"}, "fail"},
		{[]string{"identity", "fail@middle", "identity@b"}, "fail@middle"},
		{[]string{"identity", "identity@b", "fail@last"}, "fail@last"},
		{[]string{"identity", "failnil"}, "failnil"},
		{[]string{"failnil", "identity"}, "failnil"},
		{[]string{"identity", "failappend@last"}, "failappend@last"},
		{[]string{"failappend", "identity"}, "failappend"},
		// The last stage appends for the first of three records, then fails.
		{[]string{"fanout", "failsecond"}, "failsecond"},
		{[]string{"fanout", "failsecond", "identity"}, "failsecond"},
	}
	for _, tt := range tests {
		for _, pre := range []int{0, 2} {
			for _, spare := range []int{0, 8} {
				t.Run(fmt.Sprintf("%s/pre=%d/spare=%d", strings.Join(tt.names, ","), pre, spare), func(t *testing.T) {
					c := build(t, testRegistry(), tt.names...)
					out := make([]*kgo.Record, pre, pre+spare)
					for i := range out {
						out[i] = rec(fmt.Sprint("pre", i))
					}
					orig := append([]*kgo.Record(nil), out...)
					for round := range 2 { // the chain keeps working after a failure
						res, err := c.Process(context.Background(), record.Source{}, rec("v"), out)
						var te *transform.Error
						if !errors.As(err, &te) {
							t.Fatalf("round %d: error %v (%T) is not a *transform.Error", round, err, err)
						}
						if te.Stage != tt.wantStage {
							t.Errorf("Stage = %q, want %q", te.Stage, tt.wantStage)
						}
						if !errors.Is(err, errBoom) {
							t.Errorf("error %v does not wrap the stage's error", err)
						}
						if want := "transform " + tt.wantStage + ": boom"; err.Error() != want {
							t.Errorf("message = %q, want %q", err, want)
						}
						if len(res) != pre {
							t.Fatalf("len(out) = %d, want the original %d", len(res), pre)
						}
						for i := range res {
							if res[i] != orig[i] {
								t.Errorf("out[%d] changed", i)
							}
						}
					}
				})
			}
		}
	}
}

func TestProcessPanic(t *testing.T) {
	tests := []struct {
		names     []string
		wantStage string
	}{
		{[]string{"panic"}, "panic"},
		{[]string{"panic@p"}, "panic@p"},
		{[]string{"identity", "panic@mid", "tag"}, "panic@mid"},
		{[]string{"identity", "panic"}, "panic"},
		{[]string{"panic", "tag"}, "panic"},
	}
	for _, tt := range tests {
		for _, pre := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/pre=%d", strings.Join(tt.names, ","), pre), func(t *testing.T) {
				c := build(t, testRegistry(), tt.names...)
				out := make([]*kgo.Record, pre, pre+4)
				for i := range out {
					out[i] = rec(fmt.Sprint("pre", i))
				}
				orig := append([]*kgo.Record(nil), out...)

				res, err := c.Process(context.Background(), record.Source{}, rec("bad"), out)
				var te *transform.Error
				if !errors.As(err, &te) {
					t.Fatalf("error %v (%T) is not a *transform.Error", err, err)
				}
				if te.Stage != tt.wantStage {
					t.Errorf("Stage = %q, want %q", te.Stage, tt.wantStage)
				}
				var pe *transform.PanicError
				if !errors.As(err, &pe) {
					t.Fatalf("error %v does not wrap a *transform.PanicError", err)
				}
				if pe.Value != "bad record" {
					t.Errorf("Value = %v, want the panic value", pe.Value)
				}
				if len(pe.Stack) == 0 {
					t.Error("Stack is empty")
				} else if !strings.Contains(string(pe.Stack), "panicking") {
					t.Errorf("Stack does not show the panicking function:\n%s", pe.Stack)
				}
				if want := "transform " + tt.wantStage + ": panic: bad record"; err.Error() != want {
					t.Errorf("message = %q, want %q", err, want)
				}
				if len(res) != pre || !slices.Equal(res, orig) {
					t.Errorf("out = %q, want the original %q", values(res), values(orig))
				}

				// The next record goes through.
				res, err = c.Process(context.Background(), record.Source{}, rec("good"), res)
				if err != nil {
					t.Fatalf("after the panic: %v", err)
				}
				if len(res) != pre+1 || !strings.HasPrefix(string(res[pre].Value), "good") {
					t.Errorf("after the panic: out = %q", values(res))
				}
			})
		}
	}
}

func TestProcessPanicWithError(t *testing.T) {
	r := &transform.Registry{}
	r.Register("p", fn(func(context.Context, record.Source, *kgo.Record, []*kgo.Record) ([]*kgo.Record, error) {
		panic(errBoom)
	}))
	c := build(t, r, "p")
	_, err := c.Process(context.Background(), record.Source{}, rec("v"), nil)
	var pe *transform.PanicError
	if !errors.As(err, &pe) || pe.Value != errBoom {
		t.Errorf("error = %v, want a PanicError holding errBoom", err)
	}
}

type ctxKey struct{}

func TestProcessSourceAndContextPassedToEveryStage(t *testing.T) {
	var a, b, c seen
	r := testRegistry()
	r.Register("a", a.spec())
	r.Register("b", b.spec())
	r.Register("c", c.spec())
	chain := build(t, r, "a", "fanout", "b", "tag", "c")
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	srcs := []record.Source{{Topic: "orders", Partition: 3, Offset: 42}, {Topic: "refunds", Partition: 0, Offset: 7}}
	for _, src := range srcs {
		a, b, c = seen{}, seen{}, seen{}
		if _, err := chain.Process(ctx, src, rec("v"), nil); err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]*seen{"a": &a, "b": &b, "c": &c} {
			if len(s.srcs) == 0 {
				t.Errorf("stage %s not called", name)
			}
			for i, got := range s.srcs {
				if got != src {
					t.Errorf("stage %s call %d got source %+v, want %+v", name, i, got, src)
				}
				if s.ctxs[i].Value(ctxKey{}) != "v" {
					t.Errorf("stage %s call %d did not get the context", name, i)
				}
			}
		}
		if len(b.srcs) != 3 || len(c.srcs) != 3 {
			t.Errorf("stages after the fan-out called %d and %d times, want 3", len(b.srcs), len(c.srcs))
		}
	}
}

func TestChainClose(t *testing.T) {
	errA, errC := errors.New("a failed"), errors.New("c failed")
	var log []string
	r := &transform.Registry{}
	r.Register("c", closerSpec(&log, map[string]error{"c@a": errA, "c": errC}))
	r.Register("plain", fn(tag))
	ch, err := r.Build(entries(t, "c@a", "plain", "c@b", "c"), closerLookup)
	if err != nil {
		t.Fatal(err)
	}
	err = ch.Close()
	if want := []string{"c", "c@b", "c@a"}; !reflect.DeepEqual(log, want) {
		t.Errorf("closed %q, want %q", log, want)
	}
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Fatalf("Close error %v does not join both errors", err)
	}
	want := "closing transform c: c failed\nclosing transform c@a: a failed"
	if err.Error() != want {
		t.Errorf("Close error = %q, want %q", err, want)
	}

	// Without failures, or without closers, Close returns nil.
	log = nil
	r = &transform.Registry{}
	r.Register("c", closerSpec(&log, nil))
	r.Register("plain", fn(tag))
	ch2, err := r.Build(entries(t, "c", "plain"), closerLookup)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch2.Close(); err != nil || !reflect.DeepEqual(log, []string{"c"}) {
		t.Errorf("Close = %v, closed %q", err, log)
	}
	if err := build(t, testRegistry(), "identity", "tag").Close(); err != nil {
		t.Errorf("Close without closers = %v", err)
	}
}

func TestChainLen(t *testing.T) {
	r := testRegistry()
	for n, names := range [][]string{{"identity"}, {"identity", "tag"}, {"identity", "tag", "filter"}} {
		if got := build(t, r, names...).Len(); got != n+1 {
			t.Errorf("Len(%q) = %d", names, got)
		}
	}
}

// allocRegistry holds the real identity transform and a filter.
func allocRegistry(t testing.TB) *transform.Registry {
	t.Helper()
	spec, ok := transform.Default.Lookup("identity")
	if !ok {
		t.Fatal("identity is not registered")
	}
	r := &transform.Registry{}
	r.Register("identity", spec)
	r.Register("filter", fn(filter))
	return r
}

func TestProcessAllocs(t *testing.T) {
	tests := []struct {
		name  string
		names []string
	}{
		{"identity", []string{"identity"}},
		{"three identities", []string{"identity", "identity@b", "identity@c"}},
		{"filter then identity", []string{"filter", "identity"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := build(t, allocRegistry(t), tt.names...)
			ctx := context.Background()
			src := record.Source{Topic: "orders", Partition: 1, Offset: 2}
			in := rec("v")
			out := make([]*kgo.Record, 0, 16)
			var err error
			process := func() {
				out, err = c.Process(ctx, src, in, out[:0])
			}
			for range 3 { // warm-up: the chain grows its buffers
				process()
			}
			if allocs := testing.AllocsPerRun(1000, process); allocs != 0 {
				t.Errorf("Process allocates %v times per record, want 0", allocs)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func benchmarkChain(b *testing.B, names ...string) {
	c := build(b, transform.Default, names...)
	ctx := context.Background()
	src := record.Source{Topic: "orders", Partition: 1, Offset: 2}
	in := rec("v")
	out := make([]*kgo.Record, 0, 16)
	var err error
	b.ReportAllocs()
	for b.Loop() {
		out, err = c.Process(ctx, src, in, out[:0])
	}
	if err != nil || len(out) != 1 {
		b.Fatalf("Process = %d records, %v", len(out), err)
	}
}

func BenchmarkChainIdentity(b *testing.B) {
	benchmarkChain(b, "identity")
}

func BenchmarkChainThreeStages(b *testing.B) {
	benchmarkChain(b, "identity", "identity@b", "identity@c")
}

// A stage's *settings.Message names the entry's settings as the chain's
// Names say, and as declared without them; errors.Is still finds its Err.
func TestStageMessageNamesSettings(t *testing.T) {
	r := &transform.Registry{}
	r.Register("slow", transform.Plain("fails naming its TIMEOUT", func() (transform.Transform, error) {
		return transform.Func(func(context.Context, record.Source, *kgo.Record, []*kgo.Record) ([]*kgo.Record, error) {
			return nil, &settings.Message{Err: errBoom, Text: settings.Say("stopped after ", settings.Ref("TIMEOUT"), "=1s")}
		}), nil
	}))
	names := transform.Names{Setting: func(p settings.Plugin, s string) string {
		return strings.ToUpper("P_" + p.Name + "_" + p.Alias + "_" + s)
	}}
	for _, c := range []struct {
		opts []transform.BuildOption
		want string
	}{
		{[]transform.BuildOption{transform.WithNames(names)}, "transform slow@b: stopped after P_SLOW_B_TIMEOUT=1s"},
		{nil, "transform slow@b: stopped after TIMEOUT=1s"},
	} {
		ch, err := r.Build(entries(t, "slow@b"), nil, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.Process(context.Background(), record.Source{}, &kgo.Record{}, nil)
		if err == nil || err.Error() != c.want || !errors.Is(err, errBoom) {
			t.Errorf("got %v, want %q wrapping errBoom", err, c.want)
		}
	}
}

// keyOnly touches keys only.
type keyOnly struct{ transform.Func }

func (keyOnly) Touches() transform.Parts { return transform.PartKey }

// Frame places host stages around the entries: they run first and last,
// their errors name them, they are not Entries, and Touches joins every
// stage's parts (a stage without Touches touches all).
func TestFrameAndTouches(t *testing.T) {
	r := &transform.Registry{}
	r.Register("tag", fn(tag))
	r.Register("keys", transform.Plain("key stage", func() (transform.Transform, error) {
		return keyOnly{transform.Func(tag)}, nil
	}))
	c, err := r.Build([]transform.Entry{{Name: "keys"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Touches(); got != transform.PartKey {
		t.Errorf("Touches() = %v, want PartKey", got)
	}
	var order []string
	step := func(name string, fail bool) transform.Stage {
		return transform.Stage{Name: name, T: transform.Func(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			order = append(order, name+":"+string(rec.Value))
			if fail {
				return out, errBoom
			}
			return append(out, rec), nil
		})}
	}
	c.Frame([]transform.Stage{step("decode", false)}, []transform.Stage{step("encode", false)})
	out, err := c.Process(context.Background(), record.Source{}, &kgo.Record{Value: []byte("v")}, nil)
	if err != nil || len(out) != 1 || string(out[0].Value) != "v!" {
		t.Fatalf("Process = %v, %v", out, err)
	}
	if want := []string{"decode:v", "encode:v!"}; !slices.Equal(order, want) {
		t.Errorf("stages ran as %v, want %v", order, want)
	}
	if es := c.Entries(); len(es) != 1 || es[0].Name != "keys" || c.Len() != 3 {
		t.Errorf("Entries() = %v, Len() = %d; want only the entry, three stages", es, c.Len())
	}
	if got := c.Touches(); got != transform.PartAll {
		t.Errorf("Touches() with stages lacking Touches = %v, want PartAll", got)
	}
	c2, _ := r.Build([]transform.Entry{{Name: "tag"}}, nil)
	c2.Frame(nil, []transform.Stage{step("encode", true)})
	_, err = c2.Process(context.Background(), record.Source{}, &kgo.Record{Value: []byte("w")}, nil)
	var te *transform.Error
	if !errors.As(err, &te) || te.Stage != "encode" || !errors.Is(err, errBoom) {
		t.Errorf("a failing host stage: %v, want a *transform.Error of stage encode", err)
	}
}

// Unavailable and Fatal mark errors that are no record's fault, and
// survive wrapping.
func TestUnavailableAndFatal(t *testing.T) {
	u := fmt.Errorf("decode: %w", transform.Unavailable(errBoom))
	f := fmt.Errorf("decode: %w", transform.Fatal(errBoom))
	if !transform.IsUnavailable(u) || transform.IsFatal(u) || !errors.Is(u, errBoom) {
		t.Errorf("Unavailable: IsUnavailable %v, IsFatal %v", transform.IsUnavailable(u), transform.IsFatal(u))
	}
	if !transform.IsFatal(f) || transform.IsUnavailable(f) || !errors.Is(f, errBoom) {
		t.Errorf("Fatal: IsFatal %v, IsUnavailable %v", transform.IsFatal(f), transform.IsUnavailable(f))
	}
	if transform.Unavailable(nil) != nil || transform.Fatal(nil) != nil {
		t.Error("marking nil must give nil")
	}
}
