package config_test

import (
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/streamproc/processor/config"
)

// formWords are the words of a form tag: the values it spells out.
func formWords(form string) []string {
	return strings.FieldsFunc(form, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-'
	})
}

// A setting's form, the values `processor config` and its errors show,
// names every value the setting takes: its choices are declared once
// (a choices tag, or the type's Choices method, such as the formats
// package schema knows), and the typed form cannot fall behind them.
func TestFormsNameEveryChoice(t *testing.T) {
	checked := 0
	for _, f := range config.Fields() {
		if f.Choices == nil {
			continue
		}
		checked++
		words := formWords(f.Form)
		for _, c := range f.Choices {
			if !slices.Contains(words, c) {
				t.Errorf("PROCESSOR_%s: form %q does not name the choice %q", f.Name, f.Form, c)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no core setting declares choices")
	}
}
