package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/transform"
)

// docs/configuration.md is exactly what this binary's `processor config
// -markdown` prints (the core settings and every built-in transform's):
// a setting added, renamed or redocumented without `make docs` fails here.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	var b bytes.Buffer
	app.WriteReference(&b, transform.Default, true)
	file, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, "docs/configuration.md", string(file), b.String())
}

// The metrics table of docs/operations.md, between its two marker
// comments, is exactly what `processor metrics -markdown` prints (every
// family the processor's collectors register): a metric added, renamed or
// redocumented without `make docs` fails here.
func TestMetricsTableIsCurrent(t *testing.T) {
	var b bytes.Buffer
	app.WriteMetrics(&b, true)
	file, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "\n<!-- metrics table:", "\n<!-- end of the metrics table -->\n"
	i, j := bytes.Index(file, []byte(begin)), bytes.Index(file, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("docs/operations.md has no %q ... %q markers around its metrics table", begin[1:], end[1:len(end)-1])
	}
	table := file[i+1 : j+1]
	table = table[bytes.IndexByte(table, '\n')+1:] // after the first marker's line
	sameLines(t, "the metrics table of docs/operations.md", string(table), "\n"+b.String()+"\n")
	if !strings.Contains(b.String(), "| `processor_transactions_committed_total` | counter |  |") {
		t.Errorf("the table lacks processor_transactions_committed_total:\n%s", b.String())
	}
}

// sameLines fails at the first line where the committed file got differs
// from the generated want.
func sameLines(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s is out of date (run make docs); line %d is\n  %q\nwant\n  %q", what, i+1, g, w)
		}
	}
}

// Every PROCESSOR_ variable the README and the guides name exists: a core
// setting, a built-in transform's setting (also under an alias), a test
// variable or the test PostgreSQL script's, or a pattern such as
// PROCESSOR_<NAME>_<SETTING>.
func TestDocsNameOnlyRealVariables(t *testing.T) {
	// The docs' examples of a misspelt variable, and what the processor
	// says of it.
	typos := map[string]bool{"PROCESSOR_COMIT_INTERVAL": true, "PROCESSOR_AGGREGATE_WINDOWS": true, "PROCESSOR_GRUOP": true}
	var b bytes.Buffer
	app.WriteReference(&b, transform.Default, true)
	ref := b.String()
	known := map[string]bool{}
	for _, m := range regexp.MustCompile("`(PROCESSOR_[A-Z0-9_]+)`").FindAllStringSubmatch(ref, -1) {
		known[m[1]] = true
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	name := regexp.MustCompile(`PROCESSOR_[A-Z0-9_]*[A-Z0-9]`)
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, loc := range name.FindAllIndex(text, -1) {
			v := string(text[loc[0]:loc[1]])
			if next := text[loc[1]:]; len(next) > 0 && (next[0] == '<' || next[0] == '*' || bytes.HasPrefix(next, []byte("_<")) || bytes.HasPrefix(next, []byte("_*"))) {
				continue // a pattern: PROCESSOR_<NAME>_..., PROCESSOR_TLS_*
			}
			if known[v] || strings.HasPrefix(v, "PROCESSOR_TEST_") || knownAliased(v, known) || typos[v] ||
				strings.HasPrefix(v, "PROCESSOR_PG_") /* integration/postgres/pg.sh's, which starts the test PostgreSQL */ ||
				strings.HasPrefix(v, "PROCESSOR_REDACT_") /* the example plugin's (examples/goplugin) */ {
				continue
			}
			t.Errorf("%s names %s, which the processor does not read", filepath.Base(f), v)
		}
	}
}

// knownAliased reports whether v is a transform setting under an alias:
// PROCESSOR_<NAME>_<ALIAS>_<SETTING> for a known PROCESSOR_<NAME>_<SETTING>.
func knownAliased(v string, known map[string]bool) bool {
	for k := range known {
		parts := strings.SplitN(strings.TrimPrefix(k, "PROCESSOR_"), "_", 2)
		if len(parts) == 2 && strings.HasPrefix(v, "PROCESSOR_"+parts[0]+"_") && strings.HasSuffix(v, "_"+parts[1]) &&
			len(v) > len(k)+1 && k != v {
			return true
		}
	}
	return false
}
