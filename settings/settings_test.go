package settings_test

import (
	"encoding"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/settings"
)

// level is a type that parses itself (encoding.TextUnmarshaler).
type level int

func (l *level) UnmarshalText(b []byte) error {
	switch string(b) {
	case "low":
		*l = 1
	case "high":
		*l = 2
	default:
		return errors.New("not a level")
	}
	return nil
}

var _ encoding.TextUnmarshaler = (*level)(nil)

// every holds a field of every type Fill parses.
type every struct {
	Str   string        `setting:"STR" required:"true" doc:"a string" form:"any string"`
	On    bool          `setting:"ON" default:"true" doc:"a switch" form:"true or false"`
	N     int           `setting:"N" default:"-3" doc:"a number" form:"a whole number"`
	N8    int8          `setting:"N8" doc:"a small number" form:"-128 to 127"`
	U     uint16        `setting:"U" default:"7" doc:"a small count" form:"0 to 65535"`
	F     float64       `setting:"F" default:"0.5" doc:"a fraction" form:"a number such as 0.5"`
	F32   float32       `setting:"F32" doc:"a float32" form:"a number"`
	D     time.Duration `setting:"D" default:"250ms" doc:"a wait" form:"a Go duration such as 250ms"`
	Level level         `setting:"LEVEL" default:"low" doc:"a level" form:"low or high"`
	Empty string        `setting:"EMPTY" doc:"left alone when not given" form:"any string"`

	inner int //nolint:unused // unexported fields are no settings
}

func lookup(m map[string]string) settings.Lookup {
	return func(s string) (string, bool) {
		v, ok := m[s]
		return v, ok
	}
}

// Fields lists every exported field in struct order, with its tags and
// the kind of values it takes.
func TestFields(t *testing.T) {
	fields := settings.Fields(&every{})
	var got []string
	for _, f := range fields {
		got = append(got, f.Name+":"+f.Type)
	}
	want := []string{"STR:string", "ON:bool", "N:int", "N8:int", "U:uint", "F:float", "F32:float", "D:duration", "LEVEL:level", "EMPTY:string"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fields %q, want %q", got, want)
	}
	if f := fields[0]; !f.Required || f.Doc != "a string" || f.Form != "any string" || f.Default != "" {
		t.Errorf("STR: %+v", f)
	}
	if f := fields[7]; f.Required || f.Default != "250ms" {
		t.Errorf("D: %+v", f)
	}
}

// Fill sets given values, then defaults; fields neither given nor
// defaulted keep what they held.
func TestFillEveryType(t *testing.T) {
	fields := settings.Fields(&every{})
	s := every{Empty: "kept"}
	err := settings.Fill(fields, &s, lookup(map[string]string{
		"STR": "s", "ON": " false", "N": "-12", "N8": "-128", "U": "65535", "F": "1e3", "F32": "2.5", "D": "1m30s", "LEVEL": "high",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := every{Str: "s", On: false, N: -12, N8: math.MinInt8, U: math.MaxUint16, F: 1000, F32: 2.5, D: 90 * time.Second, Level: 2, Empty: "kept"}
	if s != want {
		t.Errorf("filled %+v, want %+v", s, want)
	}
	d := every{}
	if err := settings.Fill(fields, &d, lookup(map[string]string{"STR": ""})); err != nil {
		t.Fatal(err)
	}
	if want := (every{On: true, N: -3, U: 7, F: 0.5, D: 250 * time.Millisecond, Level: 1}); d != want {
		t.Errorf("defaults %+v, want %+v", d, want)
	}
}

// A nil Lookup gives nothing: a required setting without a default is
// then missing.
func TestFillNilLookup(t *testing.T) {
	err := settings.Fill(settings.Fields(&every{}), &every{}, nil)
	var se *settings.Error
	if !errors.As(err, &se) || se.Field != "STR" || !se.Unset {
		t.Fatalf("got %v, want STR unset", err)
	}
}

// Every value that does not parse, and a missing required setting, is an
// *Error naming the field, the value and the field's form.
func TestFillErrors(t *testing.T) {
	for _, c := range []struct {
		given map[string]string
		want  settings.Error
		msg   string
	}{
		{map[string]string{}, settings.Error{Field: "STR", Unset: true, Want: settings.Say("any string")},
			"setting STR is not set: want any string"},
		{map[string]string{"STR": "s", "ON": "yes please"}, settings.Error{Field: "ON", Value: "yes please", Want: settings.Say("true or false")},
			`setting ON="yes please" is invalid: want true or false`},
		{map[string]string{"STR": "s", "N": "1.5"}, settings.Error{Field: "N", Value: "1.5", Want: settings.Say("a whole number")}, ""},
		{map[string]string{"STR": "s", "N8": "128"}, settings.Error{Field: "N8", Value: "128", Want: settings.Say("-128 to 127")}, ""},
		{map[string]string{"STR": "s", "U": "-1"}, settings.Error{Field: "U", Value: "-1", Want: settings.Say("0 to 65535")}, ""},
		{map[string]string{"STR": "s", "F": "half"}, settings.Error{Field: "F", Value: "half", Want: settings.Say("a number such as 0.5")}, ""},
		{map[string]string{"STR": "s", "D": "soon"}, settings.Error{Field: "D", Value: "soon", Want: settings.Say("a Go duration such as 250ms")},
			`setting D="soon" is invalid: want a Go duration such as 250ms`},
		{map[string]string{"STR": "s", "LEVEL": "mid"}, settings.Error{Field: "LEVEL", Value: "mid", Want: settings.Say("low or high")}, ""},
	} {
		err := settings.Fill(settings.Fields(&every{}), &every{}, lookup(c.given))
		var se *settings.Error
		if !errors.As(err, &se) {
			t.Errorf("%v: got %v (%T), want an *Error", c.given, err, err)
			continue
		}
		if !reflect.DeepEqual(*se, c.want) {
			t.Errorf("%v: %+v, want %+v", c.given, *se, c.want)
		}
		if c.msg != "" && err.Error() != c.msg {
			t.Errorf("%v: %q, want %q", c.given, err, c.msg)
		}
	}
}

// Tags that cannot work panic at Fields, naming the field.
func TestFieldsPanics(t *testing.T) {
	type noName struct {
		A string `doc:"d" form:"f"`
	}
	type badName struct {
		A string `setting:"lower" doc:"d" form:"f"`
	}
	type twice struct {
		A string `setting:"A" doc:"d" form:"f"`
		B string `setting:"A" doc:"d" form:"f"`
	}
	type noDoc struct {
		A string `setting:"A" form:"f"`
	}
	type badType struct {
		A []int `setting:"A" doc:"d" form:"f"`
	}
	type badDefault struct {
		A int `setting:"A" default:"x" doc:"d" form:"f"`
	}
	for _, c := range []struct {
		s    any
		want string
	}{
		{&noName{}, "needs a tag setting"}, {&badName{}, "needs a tag setting"}, {&twice{}, "declared twice"},
		{&noDoc{}, "needs doc and form"}, {&badType{}, "cannot be parsed"}, {&badDefault{}, `default "x"`},
		{every{}, "not a pointer to a struct"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), c.want) {
					t.Errorf("%T: panic %v, want one containing %q", c.s, r, c.want)
				}
			}()
			settings.Fields(c.s)
		}()
	}
}

// An Error of a plugin names it; one refusing a value may name other
// settings of the plugin, which Expected shows as the host names them
// and Error as they are declared.
func TestErrorOfAPlugin(t *testing.T) {
	e := &settings.Error{Plugin: settings.Plugin{Kind: "transform", Name: "route", Alias: "r2"}, Field: "HEADER", Value: "h",
		Want: settings.Say("unset while ", settings.Ref("EXPR"), " is set")}
	if got, want := e.Error(), `transform route@r2: setting HEADER="h" is invalid: want unset while EXPR is set`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := e.Expected(func(s string) string { return "P_" + s }), "unset while P_EXPR is set"; got != want {
		t.Errorf("Expected = %q, want %q", got, want)
	}
	if got := (settings.Plugin{Kind: "sink", Name: "postgres"}).String(); got != "sink postgres" {
		t.Errorf("Plugin.String() = %q", got)
	}
	unset := &settings.Error{Field: "SET", Unset: true, Want: settings.Say("pairs"), Detail: settings.Say("; or ", settings.Ref("REMOVE"), " set")}
	if got, want := unset.Error(), "setting SET is not set: want pairs; or REMOVE set"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// Only the settings a Text marks are shown by the host's names: text that
// merely looks like a setting's name is left as it is.
func TestTextFormatsOnlyRefs(t *testing.T) {
	text := settings.Say("EXPRESSION or MY_EXPR or EXPR2, ", settings.Ref("EXPR"), ".", "")
	if got, want := text.Format(func(s string) string { return "P_" + s }), "EXPRESSION or MY_EXPR or EXPR2, P_EXPR."; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
	if got, want := text.String(), "EXPRESSION or MY_EXPR or EXPR2, EXPR."; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if len(settings.Say("")) != 0 {
		t.Error(`Say("") is not empty`)
	}
	defer func() {
		if recover() == nil {
			t.Error("Say(42) did not panic")
		}
	}()
	settings.Say(42)
}

// A plugin's Fill names the plugin in its error.
func TestPluginFill(t *testing.T) {
	p := settings.Plugin{Kind: "sink", Name: "postgres"}
	err := p.Fill(settings.Fields(&every{}), &every{}, nil)
	var se *settings.Error
	if !errors.As(err, &se) || se.Plugin != p || err.Error() != "sink postgres: setting STR is not set: want any string" {
		t.Errorf("got %v, want STR unset for sink postgres", err)
	}
	if err := p.Fill(settings.Fields(&every{}), &every{}, lookup(map[string]string{"STR": "s"})); err != nil {
		t.Errorf("got %v", err)
	}
}

// A secret setting's value is in no error.
func TestSecretNotShown(t *testing.T) {
	type s struct {
		Port int `setting:"PORT" secret:"true" doc:"a secret number" form:"a number (never shown)"`
	}
	fields := settings.Fields(&s{})
	if !fields[0].Secret {
		t.Fatal("PORT is not secret")
	}
	err := settings.Fill(fields, &s{}, lookup(map[string]string{"PORT": "hunter2"}))
	var se *settings.Error
	if !errors.As(err, &se) || !se.Secret || se.Value != "" || strings.Contains(err.Error(), "hunter2") ||
		err.Error() != "setting PORT is invalid (its value is not shown): want a number (never shown)" {
		t.Errorf("got %v", err)
	}
}
