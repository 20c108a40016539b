package app

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform"
)

// clearProcessorVars unsets every PROCESSOR_* variable but the test
// harness's for the test.
func clearProcessorVars(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PROCESSOR_") && !harnessVar(name) {
			t.Setenv(name, value) // restored when the test ends
			os.Unsetenv(name)
		}
	}
}

// An unknown PROCESSOR_* variable is an error of one line naming it and
// the closest setting, with how to run anyway; the processor's, the
// chain's entries' (aliases too) and the test harness's variables are
// not; a setting of a registered transform not in the chain only warns.
func TestUnknownVarIsAnError(t *testing.T) {
	cases := []struct {
		env   string
		chain []string
		want  string // the error; empty: none
	}{
		{"PROCESSOR_AGGREGATE_WINDOWS", []string{"aggregate"},
			"PROCESSOR_AGGREGATE_WINDOWS is not a setting; did you mean PROCESSOR_AGGREGATE_WINDOW? (PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true to run anyway)"},
		{"PROCESSOR_COMIT_INTERVAL", []string{"identity"},
			"PROCESSOR_COMIT_INTERVAL is not a setting; did you mean PROCESSOR_COMMIT_INTERVAL? (PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true to run anyway)"},
		{"PROCESSOR_JQ_SECOND_EXPRESSION", []string{"jq", "jq@second"},
			"PROCESSOR_JQ_SECOND_EXPRESSION is not a setting; did you mean PROCESSOR_JQ_SECOND_EXPR? (PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true to run anyway)"},
		{"PROCESSOR_XYZZY", []string{"identity"},
			"PROCESSOR_XYZZY is not a setting (PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true to run anyway)"},
		{"PROCESSOR_JQ_SECOND_EXPR", []string{"jq", "jq@second"}, ""},
		{"PROCESSOR_COMMIT_INTERVAL", []string{"identity"}, ""},
		{"PROCESSOR_TEST_ANYTHING", []string{"identity"}, ""},
		{"PROCESSOR_PG_PORT", []string{"identity"}, ""},
		{"PROCESSOR_ROUTE_EXPR", []string{"identity"}, ""}, // route is registered, not in the chain: a warning
		{"PROCESSOR_NOPE_X", []string{"nope"}, ""},         // the chain's build names the unknown transform
		// The http transform shares its prefix with two core settings.
		{"PROCESSOR_HTTP_ADDR", []string{"http"}, ""},
		{"PROCESSOR_HTTP_TOKEN_FILE", []string{"http"}, ""},
		{"PROCESSOR_HTTP_URL", []string{"identity"}, ""},
		{"PROCESSOR_HTTP_MAX_INFLIGHT", []string{"http"},
			"PROCESSOR_HTTP_MAX_INFLIGHT is not a setting; did you mean PROCESSOR_HTTP_MAX_IN_FLIGHT? (PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true to run anyway)"},
		{"PROCESSOR_HTTP_ADR", []string{"http"},
			"PROCESSOR_HTTP_ADR is not a setting; did you mean PROCESSOR_HTTP_ADDR? (PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true to run anyway)"},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			clearProcessorVars(t)
			t.Setenv(c.env, "x")
			var buf bytes.Buffer
			err := checkUnknownVars(slog.New(slog.NewTextHandler(&buf, nil)), transform.Default, c.chain, false)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case c.want != "" && (err == nil || err.Error() != c.want):
				t.Errorf("error %v, want %s", err, c.want)
			}
			if c.env == "PROCESSOR_ROUTE_EXPR" && !strings.Contains(buf.String(), "var=PROCESSOR_ROUTE_EXPR") {
				t.Errorf("no warning for a setting of a transform not in the chain: %s", buf.String())
			}
		})
	}
}

// PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true logs the unknown variable, with
// the suggestion, and runs.
func TestUnknownVarAllowed(t *testing.T) {
	clearProcessorVars(t)
	t.Setenv("PROCESSOR_COMIT_INTERVAL", "1s")
	var buf bytes.Buffer
	if err := checkUnknownVars(slog.New(slog.NewTextHandler(&buf, nil)), transform.Default, []string{"identity"}, true); err != nil {
		t.Fatalf("error %v with the override, want none", err)
	}
	if !strings.Contains(buf.String(), "PROCESSOR_COMIT_INTERVAL is not a setting; did you mean PROCESSOR_COMMIT_INTERVAL?") {
		t.Errorf("warning %q, want the variable and the suggestion", buf.String())
	}
}

// try refuses an unknown variable with exit 2 and the one line, and runs
// with the override.
func TestTryUnknownVar(t *testing.T) {
	clearProcessorVars(t)
	env := map[string]string{"TRANSFORMS": "identity", "COMIT_INTERVAL": "1s"}
	_, stderr, code := tryRun(t, transform.Default, env, "k\tv\n")
	want := "processor: configuration error: PROCESSOR_COMIT_INTERVAL is not a setting; did you mean PROCESSOR_COMMIT_INTERVAL? (PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true to run anyway)\n"
	if code != exitConfig || stderr != want {
		t.Errorf("exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
	env["ALLOW_UNKNOWN_VARIABLES"] = "true"
	env["LOG_LEVEL"] = "error"
	lines, stderr, code := tryRun(t, transform.Default, env, "k\tv\n")
	if code != exitOK || len(lines) != 1 {
		t.Errorf("with the override: exit %d, %d lines, stderr %s; want 0 and 1 line", code, len(lines), stderr)
	}
}

// When the settings cannot be loaded, the error names the first unknown
// variable too, often its cause: a misspelt required setting.
func TestUnknownVarBesideALoadError(t *testing.T) {
	clearProcessorVars(t)
	env := map[string]string{"TRANSFORMS": "aggregate", "AGGREGATE_WINDOW": "1m", "COMMIT_INTERVAL": "soon", "AGGREGATE_GRAEC": "1s"}
	_, stderr, code := tryRun(t, transform.Default, env, "k\tv\n")
	if code != exitConfig || !strings.Contains(stderr, `PROCESSOR_COMMIT_INTERVAL="soon" is invalid`) ||
		!strings.HasSuffix(stderr, "; PROCESSOR_AGGREGATE_GRAEC is not a setting; did you mean PROCESSOR_AGGREGATE_GRACE?\n") {
		t.Errorf("exit %d, stderr %q; want 2, the load error and the unknown variable", code, stderr)
	}
	t.Setenv("PROCESSOR_ALLOW_UNKNOWN_VARIABLES", "true")
	_, stderr, _ = tryRun(t, transform.Default, env, "k\tv\n")
	if strings.Contains(stderr, "GRAEC") {
		t.Errorf("with the override: %q names the unknown variable", stderr)
	}
}
