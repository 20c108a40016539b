package topic

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for name, want := range map[string]bool{
		"orders": true, "orders.eu-1_x": true, strings.Repeat("a", 249): true,
		"": false, ".": false, "..": false, "a b": false, "a/b": false, "é": false, strings.Repeat("a", 250): false,
	} {
		if got := Valid(name); got != want {
			t.Errorf("Valid(%q) = %v, want %v", name, got, want)
		}
		if got := Valid([]byte(name)); got != want {
			t.Errorf("Valid([]byte(%q)) = %v, want %v", name, got, want)
		}
	}
}

// Every character class of a topic name is accepted up to its last
// character, and the characters around each class are refused.
func TestValidCharacterEdges(t *testing.T) {
	if !Valid("azAZ09._-") {
		t.Error(`Valid("azAZ09._-") = false`)
	}
	for _, c := range "`{@[/:,+" {
		if name := "a" + string(c) + "b"; Valid(name) {
			t.Errorf("Valid(%q) = true", name)
		}
	}
}
