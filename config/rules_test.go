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
		if f.Tag.Get("envconfig") == "" || f.Tag.Get("desc") == "" {
			t.Errorf("rules[%d]: Config.%s lacks an envconfig or desc tag", i, r.field)
		}
		if r.ok == nil {
			t.Errorf("rules[%d] (%s) has no check", i, r.field)
		}
	}
}
