package config

import "testing"

// PROCESSOR_LINEAGE_HEADERS takes a form, or a boolean as before it had
// forms: true is the default, compact.
func TestLineageForms(t *testing.T) {
	for v, want := range map[string][2]bool{
		"compact": {true, false}, "legacy": {true, true}, "off": {false, false},
		"true": {true, false}, "false": {false, false}, "1": {true, false}, "0": {false, false},
	} {
		c := Config{LineageHeaders: v}
		on, legacy, ok := c.lineage()
		if !ok || [2]bool{on, legacy} != want {
			t.Errorf("%q: on %v, legacy %v, valid %v; want %v", v, on, legacy, ok, want)
		}
		if on2, legacy2 := c.Lineage(); on2 != on || legacy2 != legacy {
			t.Errorf("%q: Lineage() = %v, %v; lineage() = %v, %v", v, on2, legacy2, on, legacy)
		}
	}
	for _, v := range []string{"", "Compact", "binary", "on", "yes"} {
		if _, _, ok := (&Config{LineageHeaders: v}).lineage(); ok {
			t.Errorf("%q is taken for a form", v)
		}
	}
}
