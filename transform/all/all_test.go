package all_test

import (
	"slices"
	"testing"

	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/all"
)

// Importing all registers every built-in transform.
func TestRegistersEveryBuiltIn(t *testing.T) {
	if got, want := transform.Default.Names(), []string{"aggregate", "dedupe", "headers", "identity", "jq", "route", "wasm"}; !slices.Equal(got, want) {
		t.Errorf("registered %q, want %q", got, want)
	}
}
