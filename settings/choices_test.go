package settings_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/streamproc/processor/settings"
)

// codec is a string type that declares its choices itself.
type codec string

func (codec) Choices() []string { return []string{"raw", "avro"} }

// chosen holds settings of declared choices and a list.
type chosen struct {
	Emit   string   `setting:"EMIT" default:"update" choices:"update,close" doc:"when" form:"update or close"`
	Mech   string   `setting:"MECH" choices:"PLAIN,OAUTHBEARER" doc:"optional, empty is off" form:"PLAIN or OAUTHBEARER"`
	Must   string   `setting:"MUST" required:"true" choices:"a,b" doc:"required" form:"a or b"`
	Format codec    `setting:"FORMAT" default:"raw" doc:"typed choices" form:"raw or avro"`
	Topics []string `setting:"TOPICS" default:"a,b" doc:"a list" form:"comma-separated names"`
}

// A declared choice is the only value a setting takes: another is an
// *Error quoting it with the field's form; the empty value of an optional
// setting without a default means unset.
func TestChoices(t *testing.T) {
	fields := settings.Fields(&chosen{})
	if got := fields[0].Choices; !reflect.DeepEqual(got, []string{"update", "close"}) {
		t.Errorf("EMIT choices %q", got)
	}
	if got := fields[3].Choices; !reflect.DeepEqual(got, []string{"raw", "avro"}) {
		t.Errorf("FORMAT choices %q, want the type's", got)
	}
	var s chosen
	if err := settings.Fill(fields, &s, lookup(map[string]string{"MUST": "b", "MECH": "", "FORMAT": "avro"})); err != nil {
		t.Fatal(err)
	}
	if want := (chosen{Emit: "update", Must: "b", Format: "avro", Topics: []string{"a", "b"}}); !reflect.DeepEqual(s, want) {
		t.Errorf("filled %+v, want %+v", s, want)
	}
	for _, c := range []struct {
		given map[string]string
		want  settings.Error
	}{
		{map[string]string{"MUST": "a", "EMIT": "later"}, settings.Error{Field: "EMIT", Value: "later", Want: settings.Say("update or close")}},
		{map[string]string{"MUST": "a", "EMIT": ""}, settings.Error{Field: "EMIT", Value: "", Want: settings.Say("update or close")}},
		{map[string]string{"MUST": "", "EMIT": "close"}, settings.Error{Field: "MUST", Value: "", Want: settings.Say("a or b")}},
		{map[string]string{"MUST": "a", "MECH": "plain"}, settings.Error{Field: "MECH", Value: "plain", Want: settings.Say("PLAIN or OAUTHBEARER")}},
		{map[string]string{"MUST": "a", "FORMAT": "json"}, settings.Error{Field: "FORMAT", Value: "json", Want: settings.Say("raw or avro")}},
	} {
		var se *settings.Error
		if err := settings.Fill(fields, &chosen{}, lookup(c.given)); !errors.As(err, &se) || !reflect.DeepEqual(*se, c.want) {
			t.Errorf("%v: error %#v, want %#v", c.given, err, c.want)
		}
	}
}

// A list splits at commas as envconfig does: a blank value is no element.
func TestList(t *testing.T) {
	fields := settings.Fields(&chosen{})
	for given, want := range map[string][]string{"x": {"x"}, "x,y": {"x", "y"}, " x, y": {" x", " y"}, "": {}, "  ": {}, "x,,y": {"x", "", "y"}} {
		var s chosen
		if err := settings.Fill(fields, &s, lookup(map[string]string{"MUST": "a", "TOPICS": given})); err != nil || !reflect.DeepEqual(s.Topics, want) {
			t.Errorf("TOPICS=%q: %q, %v; want %q", given, s.Topics, err, want)
		}
	}
	if fields[4].Type != "list" {
		t.Errorf("TOPICS type %q, want list", fields[4].Type)
	}
}

// Choices that cannot work panic at Fields.
func TestChoicesPanics(t *testing.T) {
	type onInt struct {
		A int `setting:"A" choices:"1,2" doc:"d" form:"f"`
	}
	type both struct {
		A codec `setting:"A" choices:"raw" doc:"d" form:"f"`
	}
	type badDefault struct {
		A string `setting:"A" default:"c" choices:"a,b" doc:"d" form:"f"`
	}
	type empty struct {
		A string `setting:"A" choices:"a,,b" doc:"d" form:"f"`
	}
	for _, c := range []struct {
		s    any
		want string
	}{
		{&onInt{}, "choices are for string settings"}, {&both{}, "in a tag and in its type"},
		{&badDefault{}, `default "c": not one of a, b`}, {&empty{}, "empty choice"},
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

// Bind names the variables the host reads: the error's own, and those of
// the settings its text names; the message is then the user's.
func TestBind(t *testing.T) {
	name := func(s string) string { return "PROCESSOR_JQ_SECOND_" + s }
	e := &settings.Error{Plugin: settings.Plugin{Kind: "transform", Name: "jq", Alias: "second"}, Field: "EXPR", Value: ".a |",
		Want: settings.Say("a jq program"), Detail: settings.Say(" (see ", settings.Ref("TIMEOUT"), ")")}
	b := e.Bind(name)
	if b.Var != "PROCESSOR_JQ_SECOND_EXPR" || b.Field != "EXPR" || b.Plugin != e.Plugin || e.Var != "" {
		t.Errorf("bound %+v (from %+v)", b, e)
	}
	if got, want := b.Error(), `PROCESSOR_JQ_SECOND_EXPR=".a |" is invalid: want a jq program (see PROCESSOR_JQ_SECOND_TIMEOUT)`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	for _, c := range []struct {
		e    settings.Error
		want string
	}{
		{settings.Error{Var: "PROCESSOR_GROUP", Unset: true, Want: settings.Say("a group")}, "PROCESSOR_GROUP is not set: want a group"},
		{settings.Error{Var: "PROCESSOR_LOG_LEVEL", Value: "loud", Want: settings.Say("one of debug, info")}, `PROCESSOR_LOG_LEVEL="loud" is invalid: want one of debug, info`},
		{settings.Error{Var: "PROCESSOR_X", Value: "a\nb", Want: settings.Say("w")}, `PROCESSOR_X="a\nb" is invalid: want w`},
		{settings.Error{Var: "PROCESSOR_X", Value: "", Want: settings.Say("w")}, `PROCESSOR_X="" is invalid: want w`},
		{settings.Error{Var: "PROCESSOR_SASL_PASSWORD", Secret: true, Want: settings.Say("w")}, "PROCESSOR_SASL_PASSWORD is invalid (its value is not shown): want w"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}
