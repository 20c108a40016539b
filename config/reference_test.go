package config_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
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
