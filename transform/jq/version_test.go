package jq

import (
	"os"
	"strings"
	"testing"
)

// gojqModule is the module whose evaluation the fast path is held to.
const gojqModule = "github.com/itchyny/gojq"

// The differential corpus was run against the gojq this build uses: the
// version in go.mod is the one recorded in testdata/gojq-fuzzed-version.
// A gojq that moves may evaluate programs differently (fix a bug the fast
// path copies, add one), and nothing else would notice: the fast path is
// held to the gojq it was fuzzed against, not to the one it runs with.
func TestGojqVersionFuzzed(t *testing.T) {
	version := gojqVersion(t)
	b, err := os.ReadFile("testdata/gojq-fuzzed-version")
	if err != nil {
		t.Fatal(err)
	}
	if fuzzed := strings.TrimSpace(string(b)); fuzzed != version {
		t.Fatalf("gojq is %s in go.mod, but the jq fast path was last fuzzed against %s: run make fuzz FUZZTIME=10000000x "+
			"(FuzzJQDiff against the new gojq), fix every divergence it finds in the fast path (or keep gojq's answer, "+
			"gojqbug.go) and add it to testdata/fuzz/FuzzJQDiff, see whether TestGojqBranchedPipeBug still holds, "+
			"then write %s into transform/jq/testdata/gojq-fuzzed-version", version, fuzzed, version)
	}
}

// gojqVersion is gojq's version as go.mod requires it (a test binary's
// build information lists no modules); a replace directive for it is
// taken as a version of its own.
func gojqVersion(t *testing.T) string {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		switch {
		case len(f) >= 2 && f[0] == gojqModule:
			version = f[1]
		case len(f) >= 3 && f[0] == "replace" && f[1] == gojqModule:
			return strings.Join(f[2:], " ")
		}
	}
	if version == "" {
		t.Fatalf("go.mod does not require %s", gojqModule)
	}
	return version
}
