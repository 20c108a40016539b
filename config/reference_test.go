package config_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/settings"
)

// Every Config field is documented: a variable name, a form that error
// messages quote, and a one-line doc for the configuration reference.
func TestEveryFieldIsDocumented(t *testing.T) {
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		for _, key := range []string{"setting", "form", "doc"} {
			if strings.TrimSpace(f.Tag.Get(key)) == "" {
				t.Errorf("Config.%s has no %s tag", f.Name, key)
			}
		}
		if doc := f.Tag.Get("doc"); strings.ContainsAny(doc, "\r\n`") || strings.HasSuffix(doc, ".") {
			t.Errorf("Config.%s doc %q: want one plain line without a final period", f.Name, doc)
		}
	}
}

// Reference lists every field, in field order, from its tags; Vars names
// the same variables in the same order.
func TestReferenceMatchesConfigAndVars(t *testing.T) {
	ref := config.Reference()
	typ := reflect.TypeFor[config.Config]()
	if len(ref) != typ.NumField() {
		t.Fatalf("Reference() has %d entries for %d fields", len(ref), typ.NumField())
	}
	for i, v := range ref {
		tag := typ.Field(i).Tag
		want := config.Var{Name: config.EnvName(tag.Get("setting")), Default: tag.Get("default"), Form: tag.Get("form"), Doc: tag.Get("doc")}
		if v != want {
			t.Errorf("Reference()[%d] = %+v, want %+v", i, v, want)
		}
		if v.Form == "" || v.Doc == "" {
			t.Errorf("%s: empty Form or Doc: %+v", v.Name, v)
		}
	}
	names := make([]string, len(ref))
	for i, v := range ref {
		names[i] = v.Name
	}
	if vars := config.Vars(); !slices.Equal(vars, names) {
		t.Errorf("Vars() = %q, want Reference's names %q", vars, names)
	}
	if first := ref[0]; first.Name != "PROCESSOR_BROKERS" || first.Default != "" {
		t.Errorf("Reference()[0] = %+v, want PROCESSOR_BROKERS without a default", first)
	}

	// Each call returns a fresh slice.
	ref[0].Name = "changed"
	if config.Reference()[0].Name != "PROCESSOR_BROKERS" {
		t.Error("changing Reference's result changed the next one")
	}
}

// Each Default, set explicitly, loads the same configuration as leaving the
// variable unset: the reference shows the defaults as they are written.
func TestReferenceDefaultsAreTheDefaults(t *testing.T) {
	setEnv(t, nil)
	unsetLoaded, err := config.Load("h")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	set := map[string]string{}
	for _, v := range config.Reference() {
		if v.Default != "" {
			set[strings.TrimPrefix(v.Name, config.Prefix+"_")] = v.Default
		}
	}
	if len(set) < 15 {
		t.Fatalf("only %d defaults in Reference: %v", len(set), set)
	}
	setEnv(t, set)
	setLoaded, err := config.Load("h")
	if err != nil {
		t.Fatalf("Load with every default set: %v", err)
	}
	if !reflect.DeepEqual(setLoaded, unsetLoaded) {
		t.Errorf("defaults set explicitly:\n got %+v\nwant %+v", setLoaded, unsetLoaded)
	}
}

// A setting of declared choices takes only those, and its form, which the
// reference and the errors show, names every one of them; the formats are
// those package schema knows, not a list of config's own.
func TestChoicesAreDeclaredAndShown(t *testing.T) {
	declared := map[string][]string{}
	for _, f := range config.Fields() {
		if f.Choices == nil {
			continue
		}
		declared[f.Name] = f.Choices
		for _, c := range f.Choices {
			if !strings.Contains(f.Form, c) {
				t.Errorf("%s: form %q does not name the choice %q", config.EnvName(f.Name), f.Form, c)
			}
		}
	}
	for _, name := range []string{"LOG_LEVEL", "LOG_FORMAT", "ON_ERROR", "GUARANTEE", "ORDERING", "COMPRESSION", "SASL_MECHANISM",
		"SASL_OAUTH_CLIENT_AUTH", "KEY_SUBJECT_STRATEGY", "VALUE_SUBJECT_STRATEGY"} {
		if declared[name] == nil {
			t.Errorf("%s declares no choices", config.EnvName(name))
		}
	}
	for _, name := range []string{"KEY_FORMAT", "VALUE_FORMAT", "OUTPUT_KEY_FORMAT", "OUTPUT_VALUE_FORMAT"} {
		if !slices.Equal(declared[name], schema.Raw.Choices()) {
			t.Errorf("%s takes %q, want schema's formats %q", config.EnvName(name), declared[name], schema.Raw.Choices())
		}
	}
	if !slices.Equal(config.Compressions, declared["COMPRESSION"]) || !slices.Equal(config.SASLMechanisms, declared["SASL_MECHANISM"]) {
		t.Errorf("Compressions %q, SASLMechanisms %q: want the declared choices", config.Compressions, config.SASLMechanisms)
	}
}

// A value outside the choices is refused, naming the variable and quoting
// the form; an optional setting without a default takes the empty value as
// unset.
func TestChoicesRefuseOtherValues(t *testing.T) {
	for name, value := range map[string]string{"KEY_FORMAT": "json", "OUTPUT_VALUE_FORMAT": "Avro", "LOG_LEVEL": "", "SASL_MECHANISM": "plain"} {
		setEnv(t, map[string]string{name: value})
		_, err := config.Load("h")
		var se *settings.Error
		if !errors.As(err, &se) || se.Var != config.EnvName(name) || se.Value != value {
			t.Errorf("%s=%q: %v, want the error of %s", name, value, err, config.EnvName(name))
		}
	}
	setEnv(t, map[string]string{"SASL_MECHANISM": "", "OUTPUT_KEY_FORMAT": ""})
	if c, err := config.Load("h"); err != nil || c.SASLMechanism != "" || c.OutputKeyFormatOrDefault() != schema.Raw {
		t.Errorf("empty optional choices: %+v, %v", c, err)
	}
}
