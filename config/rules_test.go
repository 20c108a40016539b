package config

import (
	"reflect"
	"testing"
)

// Every rule of Validate names a Config field, so its error names a
// variable and quotes its form.
func TestRulesNameConfigFields(t *testing.T) {
	typ := reflect.TypeFor[Config]()
	for i, r := range rules {
		f, ok := typ.FieldByName(r.field)
		if !ok {
			t.Errorf("rules[%d] names no Config field: %q", i, r.field)
			continue
		}
		if f.Tag.Get("setting") == "" || f.Tag.Get("form") == "" {
			t.Errorf("rules[%d]: Config.%s lacks a setting or form tag", i, r.field)
		}
		if r.ok == nil {
			t.Errorf("rules[%d] (%s) has no check", i, r.field)
		}
	}
}
