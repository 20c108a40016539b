package transform_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/identity"
)

func passThrough() (transform.Transform, error) {
	return transform.Func(func(_ context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
		return append(out, rec), nil
	}), nil
}

func plain(doc string) transform.Spec { return transform.Plain(doc, passThrough) }

func TestParseEntry(t *testing.T) {
	valid := []struct {
		in   string
		want transform.Entry
	}{
		{"identity", transform.Entry{Name: "identity"}},
		{"jq@first", transform.Entry{Name: "jq", Alias: "first"}},
		{"  jq@first\t", transform.Entry{Name: "jq", Alias: "first"}},
		{"_x", transform.Entry{Name: "_x"}},
		{"a1@b_2", transform.Entry{Name: "a1", Alias: "b_2"}},
		{"Route@Second", transform.Entry{Name: "Route", Alias: "Second"}},
		{"jq@_", transform.Entry{Name: "jq", Alias: "_"}},
	}
	for _, tt := range valid {
		got, err := transform.ParseEntry(tt.in)
		if err != nil {
			t.Errorf("ParseEntry(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseEntry(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		// Round trip: String gives back the trimmed input, and parses to the same entry.
		if s := got.String(); s != strings.TrimSpace(tt.in) {
			t.Errorf("ParseEntry(%q).String() = %q", tt.in, s)
		}
		if again, err := transform.ParseEntry(got.String()); err != nil || again != got {
			t.Errorf("ParseEntry(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}

	invalid := []struct {
		in       string
		wantPart string // what the message blames
	}{
		{"", "is not a transform name"},
		{"   ", "is not a transform name"},
		{"a b", "is not a transform name"},
		{"jq@", "alias"},
		{"1abc", "is not a transform name"},
		{"x@y@z", "alias"}, // the alias "y@z" is not an identifier
		{"@alias", "is not a transform name"},
		{"jq@1st", "alias"},
		{"jq@a b", "alias"},
		{"a-b", "is not a transform name"},
		{"jq.v2", "is not a transform name"},
		{"jq,route", "is not a transform name"},
		{"naïve", "is not a transform name"},
	}
	for _, tt := range invalid {
		e, err := transform.ParseEntry(tt.in)
		if err == nil {
			t.Errorf("ParseEntry(%q) = %+v, want an error", tt.in, e)
			continue
		}
		if e != (transform.Entry{}) {
			t.Errorf("ParseEntry(%q) returned %+v along with its error", tt.in, e)
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("%q", tt.in)) || !strings.Contains(msg, tt.wantPart) {
			t.Errorf("ParseEntry(%q) error %q: want the input quoted and %q", tt.in, msg, tt.wantPart)
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("ParseEntry(%q) error is not one line: %q", tt.in, msg)
		}
	}
}

func TestEntryString(t *testing.T) {
	tests := []struct {
		e    transform.Entry
		want string
	}{
		{transform.Entry{Name: "identity"}, "identity"},
		{transform.Entry{Name: "jq", Alias: "second"}, "jq@second"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

// mustPanic runs f and returns the panic message, failing if f returns.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		v := recover()
		if v == nil {
			t.Fatalf("did not panic")
		}
		msg = fmt.Sprint(v)
	}()
	f()
	return ""
}

func TestRegisterPanics(t *testing.T) {
	tests := []struct {
		name     string
		register func(r *transform.Registry)
		wantPart string
	}{
		{"duplicate name", func(r *transform.Registry) {
			r.Register("dup", plain("one"))
			r.Register("dup", plain("two"))
		}, `Register called twice for "dup"`},
		{"empty name", func(r *transform.Registry) { r.Register("", plain("x")) }, `name "" is not a plain identifier`},
		{"name with a dash", func(r *transform.Registry) { r.Register("a-b", plain("x")) }, `"a-b" is not a plain identifier`},
		{"name with @", func(r *transform.Registry) { r.Register("jq@x", plain("x")) }, `"jq@x" is not a plain identifier`},
		{"name starting with a digit", func(r *transform.Registry) { r.Register("1jq", plain("x")) }, `"1jq" is not a plain identifier`},
		{"name with a space", func(r *transform.Registry) { r.Register("j q", plain("x")) }, `"j q" is not a plain identifier`},
		{"nil New", func(r *transform.Registry) { r.Register("nonew", transform.Spec{Doc: "x"}) }, `"nonew" with a nil New`},
		{"nil New with settings", func(r *transform.Registry) {
			r.Register("nonew", transform.Spec{Settings: func() any { return new(struct{}) }})
		}, "nil New"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r transform.Registry
			msg := mustPanic(t, func() { tt.register(&r) })
			if !strings.Contains(msg, tt.wantPart) {
				t.Errorf("panic %q does not contain %q", msg, tt.wantPart)
			}
		})
	}

	t.Run("duplicate keeps the first", func(t *testing.T) {
		var r transform.Registry
		r.Register("dup", plain("first"))
		mustPanic(t, func() { r.Register("dup", plain("second")) })
		if s, ok := r.Lookup("dup"); !ok || s.Doc != "first" {
			t.Errorf("Lookup(dup) = %+v, %v; want the first spec", s, ok)
		}
	})
	t.Run("invalid name registers nothing", func(t *testing.T) {
		var r transform.Registry
		mustPanic(t, func() { r.Register("a b", plain("x")) })
		mustPanic(t, func() { r.Register("nonew", transform.Spec{}) })
		if n := r.Names(); len(n) != 0 {
			t.Errorf("Names = %q, want none", n)
		}
	})
	t.Run("package-level Register on a taken Default name", func(t *testing.T) {
		msg := mustPanic(t, func() { transform.Register("identity", plain("again")) })
		if !strings.Contains(msg, `"identity"`) {
			t.Errorf("panic %q does not name identity", msg)
		}
	})
}

func TestRegistryNamesAndLookup(t *testing.T) {
	var r transform.Registry
	if n := r.Names(); n == nil || len(n) != 0 {
		t.Errorf("Names of the zero Registry = %#v, want an empty non-nil slice", n)
	}
	if _, ok := r.Lookup("x"); ok {
		t.Error("Lookup on the zero Registry found something")
	}
	for _, n := range []string{"zeta", "alpha", "Mid", "_under", "beta2", "beta"} {
		r.Register(n, plain("doc of "+n))
	}
	want := []string{"Mid", "_under", "alpha", "beta", "beta2", "zeta"}
	if got := r.Names(); !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
	// Names returns a copy.
	r.Names()[0] = "mutated"
	if got := r.Names(); got[0] != "Mid" {
		t.Errorf("Names shares its slice: %q", got)
	}
	for _, n := range want {
		s, ok := r.Lookup(n)
		if !ok || s.Doc != "doc of "+n || s.New == nil {
			t.Errorf("Lookup(%q) = %+v, %v", n, s, ok)
		}
	}
	for _, n := range []string{"ALPHA", "alpha@x", "", "gamma"} {
		if _, ok := r.Lookup(n); ok {
			t.Errorf("Lookup(%q) found a spec", n)
		}
	}
}

func TestRegistryIndependentOfDefault(t *testing.T) {
	if _, ok := transform.Default.Lookup("identity"); !ok {
		t.Fatal("identity is not registered in Default")
	}
	if !slices.Contains(transform.Default.Names(), "identity") {
		t.Errorf("Default.Names() = %q lacks identity", transform.Default.Names())
	}
	var r transform.Registry
	if _, ok := r.Lookup("identity"); ok {
		t.Error("a fresh Registry sees Default's identity")
	}
	r.Register("only_in_fresh", plain("x"))
	if _, ok := transform.Default.Lookup("only_in_fresh"); ok {
		t.Error("registering in a fresh Registry changed Default")
	}
	// A name taken in Default is free in a fresh registry.
	r.Register("identity", plain("mine"))
	if s, _ := r.Lookup("identity"); s.Doc != "mine" {
		t.Errorf("fresh identity = %+v", s)
	}
	if s, _ := transform.Default.Lookup("identity"); s.Doc == "mine" {
		t.Error("Default's identity was replaced")
	}
}

func TestRegistryConcurrent(t *testing.T) {
	var r transform.Registry
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			r.Register(fmt.Sprintf("t%d", i), plain("x"))
		}
	}()
	for range 100 {
		r.Names()
		r.Lookup("t1")
	}
	<-done
	if n := len(r.Names()); n != 100 {
		t.Errorf("len(Names) = %d, want 100", n)
	}
}

func TestTypedAndPlain(t *testing.T) {
	type settings struct{ N int }
	var got *settings
	spec := transform.Typed("typed doc", func(s *settings) (transform.Transform, error) {
		got = s
		return passThrough()
	})
	if spec.Doc != "typed doc" || spec.Settings == nil || spec.New == nil {
		t.Fatalf("Typed spec = %+v", spec)
	}
	s1, s2 := spec.Settings(), spec.Settings()
	if s1.(*settings) == s2.(*settings) {
		t.Error("Settings returns the same pointer twice")
	}
	s1.(*settings).N = 5
	if _, err := spec.New(s1); err != nil {
		t.Fatal(err)
	}
	if got != s1.(*settings) || got.N != 5 {
		t.Errorf("build got %+v, want the settings passed to New", got)
	}

	p := transform.Plain("plain doc", passThrough)
	if p.Doc != "plain doc" || p.Settings != nil || p.New == nil {
		t.Fatalf("Plain spec = %+v", p)
	}
	if tr, err := p.New(nil); err != nil || tr == nil {
		t.Errorf("Plain New = %v, %v", tr, err)
	}
}

func TestErrorTypes(t *testing.T) {
	inner := errors.New("boom")
	e := &transform.Error{Stage: "jq@second", Err: inner}
	if e.Error() != "transform jq@second: boom" {
		t.Errorf("Error() = %q", e.Error())
	}
	if !errors.Is(e, inner) {
		t.Error("Error does not unwrap to its cause")
	}
	pe := &transform.PanicError{Value: "oops"}
	if pe.Error() != "panic: oops" {
		t.Errorf("PanicError.Error() = %q", pe.Error())
	}
	ue := &transform.UnknownError{Name: "nope", Known: []string{"identity", "jq"}}
	if ue.Error() != `unknown transform "nope" (known: identity, jq)` {
		t.Errorf("UnknownError.Error() = %q", ue.Error())
	}
}
