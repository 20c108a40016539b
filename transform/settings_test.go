package transform_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/bytesize"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// allSettings has a field of every kind a setting may be.
type allSettings struct {
	Str   string        `setting:"STR" required:"true" doc:"a string" form:"any string"`
	On    bool          `setting:"ON" default:"true" doc:"a switch" form:"true or false"`
	N     int           `setting:"N" default:"-3" doc:"a number" form:"a whole number"`
	U     uint16        `setting:"U" default:"7" doc:"a small count" form:"0 to 65535"`
	F     float64       `setting:"F" default:"0.5" doc:"a fraction" form:"a number such as 0.5"`
	D     time.Duration `setting:"D" default:"250ms" doc:"a wait" form:"a Go duration such as 250ms"`
	Size  bytesize.Size `setting:"SIZE" default:"2MiB" doc:"a size" form:"a size such as 2MiB"`
	Empty string        `setting:"EMPTY" doc:"left alone when not given" form:"any string"`
	inner int
}

// registerAll registers "all" in a new registry; New records the settings
// it got and refuses N=13 with a detail.
func registerAll(got **allSettings) *transform.Registry {
	r := &transform.Registry{}
	r.Register("all", transform.Typed("every kind", func(s *allSettings) (transform.Transform, error) {
		*got = s
		if s.N == 13 {
			return nil, transform.Invalid("N", "13", ", and not 13 (unlucky; see ON)")
		}
		if s.Str == "missing" {
			return nil, transform.Missing("STR", "")
		}
		return transform.Func(nil), nil
	}))
	return r
}

func lookupMap(m map[string]string) transform.Lookup {
	return func(e transform.Entry, setting string) (string, bool) {
		v, ok := m[e.String()+"."+setting]
		return v, ok
	}
}

// Fields lists the declared settings in struct order, with type, default,
// required, doc and form; unexported fields are not settings.
func TestSpecFields(t *testing.T) {
	var got *allSettings
	spec, _ := registerAll(&got).Lookup("all")
	fields := spec.Fields()
	var names, types []string
	for _, f := range fields {
		names, types = append(names, f.Name), append(types, f.Type)
	}
	if want := []string{"STR", "ON", "N", "U", "F", "D", "SIZE", "EMPTY"}; !reflect.DeepEqual(names, want) {
		t.Errorf("names = %q, want %q", names, want)
	}
	if want := []string{"string", "bool", "int", "uint", "float", "duration", "Size", "string"}; !reflect.DeepEqual(types, want) {
		t.Errorf("types = %q, want %q", types, want)
	}
	if f := fields[0]; !f.Required || f.Doc != "a string" || f.Form != "any string" || f.Default != "" {
		t.Errorf("STR = %+v", f)
	}
	if f := fields[5]; f.Required || f.Default != "250ms" {
		t.Errorf("D = %+v", f)
	}
	if transform.Plain("", nil).Fields() != nil {
		t.Error("a spec without settings declares fields")
	}
}

// Given values are parsed into their fields; the others take their
// defaults, or stay zero without one.
func TestBuildFillsSettings(t *testing.T) {
	var got *allSettings
	r := registerAll(&got)
	if _, err := r.Build([]transform.Entry{{Name: "all", Alias: "x"}}, lookupMap(map[string]string{
		"all@x.STR": "hello", "all@x.N": " 42", "all@x.D": "2s", "all@x.SIZE": "64KiB", "all@x.ON": "false",
	})); err != nil {
		t.Fatal(err)
	}
	want := allSettings{Str: "hello", On: false, N: 42, U: 7, F: 0.5, D: 2 * time.Second, Size: 64 << 10}
	if *got != want {
		t.Errorf("settings = %+v, want %+v", *got, want)
	}
	// An empty string given is a value, not a missing setting.
	if _, err := r.Build([]transform.Entry{{Name: "all"}}, lookupMap(map[string]string{"all.STR": ""})); err != nil || got.Str != "" || got.D != 250*time.Millisecond {
		t.Errorf("STR given empty: %v, %+v", err, got)
	}
}

// Every way a setting can be wrong is a one-line *SettingError naming the
// entry, the setting, the value, and the form (with New's detail).
func TestBuildSettingErrors(t *testing.T) {
	var got *allSettings
	r := registerAll(&got)
	for _, c := range []struct {
		given map[string]string
		want  settings.Error
		msg   string
	}{
		{map[string]string{}, settings.Error{Field: "STR", Unset: true, Want: settings.Say("any string")},
			"transform all: setting STR is not set: want any string"},
		{map[string]string{"all.STR": "missing"}, settings.Error{Field: "STR", Unset: true, Want: settings.Say("any string")},
			"transform all: setting STR is not set: want any string"},
		{map[string]string{"all.STR": "s", "all.N": "1.5"}, settings.Error{Field: "N", Value: "1.5", Want: settings.Say("a whole number")},
			`transform all: setting N="1.5" is invalid: want a whole number`},
		{map[string]string{"all.STR": "s", "all.U": "65536"}, settings.Error{Field: "U", Value: "65536", Want: settings.Say("0 to 65535")}, ""},
		{map[string]string{"all.STR": "s", "all.ON": "yes please"}, settings.Error{Field: "ON", Value: "yes please", Want: settings.Say("true or false")}, ""},
		{map[string]string{"all.STR": "s", "all.F": "half"}, settings.Error{Field: "F", Value: "half", Want: settings.Say("a number such as 0.5")}, ""},
		{map[string]string{"all.STR": "s", "all.D": "soon"}, settings.Error{Field: "D", Value: "soon", Want: settings.Say("a Go duration such as 250ms")}, ""},
		{map[string]string{"all.STR": "s", "all.SIZE": "64MB"}, settings.Error{Field: "SIZE", Value: "64MB", Want: settings.Say("a size such as 2MiB")}, ""},
		{map[string]string{"all.STR": "s", "all.N": "13"}, settings.Error{Field: "N", Value: "13", Want: settings.Say("a whole number"), Detail: settings.Say(", and not 13 (unlucky; see ON)")},
			`transform all: setting N="13" is invalid: want a whole number, and not 13 (unlucky; see ON)`},
	} {
		_, err := r.Build([]transform.Entry{{Name: "all"}}, lookupMap(c.given))
		var se *settings.Error
		if !errors.As(err, &se) {
			t.Errorf("%v: error %v (%T), want a *settings.Error", c.given, err, err)
			continue
		}
		c.want.Plugin = transform.Entry{Name: "all"}.Plugin()
		if !reflect.DeepEqual(*se, c.want) {
			t.Errorf("%v: %+v, want %+v", c.given, *se, c.want)
		}
		if c.msg != "" && err.Error() != c.msg {
			t.Errorf("%v: %q, want %q", c.given, err, c.msg)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: a message of several lines: %q", c.given, err)
		}
	}
}

// Settings tags that cannot work panic at registration, naming the field.
func TestRegisterRefusesBadSettings(t *testing.T) {
	type noName struct {
		A string `doc:"d" form:"f"`
	}
	type lower struct {
		A string `setting:"a" doc:"d" form:"f"`
	}
	type twice struct {
		A string `setting:"A" doc:"d" form:"f"`
		B string `setting:"A" doc:"d" form:"f"`
	}
	type noDoc struct {
		A string `setting:"A" form:"f"`
	}
	type noForm struct {
		A string `setting:"A" doc:"d"`
	}
	type badType struct {
		A []int `setting:"A" doc:"d" form:"f"`
	}
	type badDefault struct {
		A time.Duration `setting:"A" default:"forever" doc:"d" form:"f"`
	}
	for _, c := range []struct {
		spec transform.Spec
		want string
	}{
		{transform.Typed("", func(*noName) (transform.Transform, error) { return nil, nil }), `noName.A: needs a tag setting:"NAME"`},
		{transform.Typed("", func(*lower) (transform.Transform, error) { return nil, nil }), `lower.A: needs a tag setting:"NAME"`},
		{transform.Typed("", func(*twice) (transform.Transform, error) { return nil, nil }), "twice.B: setting A is declared twice"},
		{transform.Typed("", func(*noDoc) (transform.Transform, error) { return nil, nil }), "noDoc.A: needs doc and form tags"},
		{transform.Typed("", func(*noForm) (transform.Transform, error) { return nil, nil }), "noForm.A: needs doc and form tags"},
		{transform.Typed("", func(*badType) (transform.Transform, error) { return nil, nil }), "badType.A: type []int cannot be parsed"},
		{transform.Typed("", func(*badDefault) (transform.Transform, error) { return nil, nil }), `badDefault.A: default "forever"`},
		{transform.Spec{Settings: func() any { return noName{} }, New: func(any) (transform.Transform, error) { return nil, nil }}, "are not a pointer to a struct"},
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(string), c.want) {
					t.Errorf("Register panicked with %v, want %q", p, c.want)
				}
			}()
			(&transform.Registry{}).Register("x", c.spec)
		}()
	}
}
