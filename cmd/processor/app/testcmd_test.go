package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform"
)

// testRun writes doc to a file and runs `processor test FILE` on it with
// env set (names without the PROCESSOR_ prefix), and returns its stdout,
// stderr, exit code and the file's path.
func testRun(t *testing.T, env map[string]string, doc string) (string, string, int, string) {
	t.Helper()
	clearProcessorVars(t)
	for k, v := range env {
		t.Setenv("PROCESSOR_"+k, v)
	}
	path := filepath.Join(t.TempDir(), "cases.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runTest([]string{path}, transform.Default, &stdout, &stderr)
	return stdout.String(), stderr.String(), code, path
}

// Cases that pass: outputs compared as JSON (key order and the way a
// number is written do not count), exactly with exact, headers listed
// must be there, a jq predicate on the record; a case's env overrides the
// file's; filtered inputs by index. Exit 0, PASS per case and the
// summary.
func TestTestCommandPasses(t *testing.T) {
	doc := `
env:
  PROCESSOR_TRANSFORMS: jq
  PROCESSOR_JQ_EXPR: '.total = .price * .qty'
cases:
  - name: adds the total
    input:
      - key: o1
        value: {"price": 2, "qty": 3}
        headers: {source: web}
    expect:
      outputs:
        - topic: try-output
          key: o1
          value: {"qty": 3.0, "total": 6, "price": 2e0}
          headers: {source: web, processor.source: try/0/0}
        - jq: '.value.total > 5 and .key == "o1" and .headers.source == "web"'
      filtered: 0
  - name: filters
    env:
      PROCESSOR_JQ_EXPR: 'select(.keep)'
    input:
      - value: '{"keep": false}'
      - value: '{"keep": true,"n":1}'
        topic: other
    expect:
      outputs:
        - value: '{"keep":true,"n":1}'
          exact: true
      filtered: [0]
      dead_letters: []
`
	doc = strings.Replace(doc, "        - jq:", "  - name: predicate\n    input:\n      - {key: o1, value: {price: 3, qty: 2}, headers: {source: web}}\n    expect:\n      outputs:\n        - jq:", 1)
	stdout, stderr, code, _ := testRun(t, nil, doc)
	want := "PASS adds the total\nPASS predicate\nPASS filters\n3 passed, 0 failed\n"
	if code != exitOK || stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit 0, stdout:\n%s", code, stdout, stderr, want)
	}
}

// A case that fails shows, per record, what was expected and what was
// written, and why they differ; the others still run. Exit 1.
func TestTestCommandFails(t *testing.T) {
	doc := `
cases:
  - name: wrong total
    input:
      - {key: o1, value: {"price": 2, "qty": 3}}
    expect:
      outputs:
        - {key: o1, value: {"price": 2, "qty": 3, "total": 7}}
  - name: passes
    input:
      - {key: o2, value: {"price": 1, "qty": 1}}
    expect:
      outputs:
        - jq: '.value.total == 1'
  - name: too few and a false predicate
    input:
      - {key: a, value: {"price": 1, "qty": 1}}
      - {key: b, value: {"price": 1, "qty": 2}}
    expect:
      outputs:
        - jq: '.value.total > 1'
      filtered: 1
`
	stdout, stderr, code, path := testRun(t, map[string]string{"TRANSFORMS": "jq", "JQ_EXPR": ".total = .price * .qty"}, doc)
	want := "FAIL wrong total (" + path + ":3)\n" +
		"    output 0 (of input 0, line 8): value differs\n" +
		`        expected: key="o1" value={"price":2,"qty":3,"total":7}` + "\n" +
		`        got:      topic=try-output key="o1" value={"price":2,"qty":3,"total":6} header processor.source="try/0/0"` + "\n" +
		"PASS passes\n" +
		"FAIL too few and a false predicate (" + path + ":15)\n" +
		"    outputs: expected 1, got 2\n" +
		"    output 0 (of input 0, line 21): jq .value.total > 1 gave false, not true\n" +
		"        expected: jq .value.total > 1\n" +
		`        got:      topic=try-output key="a" value={"price":1,"qty":1,"total":1} header processor.source="try/0/0"` + "\n" +
		"    output 1 (of input 1):\n" +
		"        expected: (none)\n" +
		`        got:      topic=try-output key="b" value={"price":1,"qty":2,"total":2} header processor.source="try/0/1"` + "\n" +
		"    filtered: expected 1 inputs, got 0 []\n" +
		"1 passed, 2 failed\n"
	if code != exitRuntime || stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit 1, stdout:\n%s", code, stdout, stderr, want)
	}
}

// A malformed file, or a case whose settings are wrong, is one line on
// stderr naming the file, the line (and the case) and what is wrong; exit
// 2, no case reported.
func TestTestCommandMalformed(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"not YAML", "cases: [", "did not find expected node content"},
		{"no cases", "env: {}\n", ":1: cases: want a list of at least one case"},
		{"unknown field", "cases:\n  - name: a\n    inputs: []\n", `:3: case "a": a case: unknown field "inputs" (want name, env, exact, input, expect)`},
		{"no expect", "cases:\n  - name: a\n    input: [{value: x}]\n", `:2: case "a": expect: missing`},
		{"bad jq", "cases:\n  - name: a\n    input: [{value: x}]\n    expect:\n      outputs: [{jq: '.a |'}]\n", `:5: case "a": jq ".a |":`},
		{"bad timestamp", "cases:\n  - name: a\n    input: [{value: x, timestamp: yesterday}]\n    expect: {}\n", `:3: case "a": timestamp "yesterday"`},
		{"input index", "cases:\n  - name: a\n    input: [{value: x}]\n    expect: {filtered: [1]}\n", `:4: case "a": filtered: want the index of an input, from 0 to 0`},
		{"same name", "cases:\n  - {name: a, input: [{value: x}], expect: {}}\n  - {name: a, input: [{value: x}], expect: {}}\n", `:3: case "a": a second case of that name`},
		{"not a setting", "cases:\n  - name: a\n    env: {GROUP: g}\n    input: [{value: x}]\n    expect: {}\n", `:3: case "a": env: GROUP is not a PROCESSOR_* variable`},
		{"bad setting", "cases:\n  - name: a\n    env: {PROCESSOR_TRANSFORMS: aggregate, PROCESSOR_AGGREGATE_WINDOW: soon}\n    input: [{value: x}]\n    expect: {}\n",
			`:2: case "a": transform aggregate: PROCESSOR_AGGREGATE_WINDOW="soon" is invalid: want a Go duration`},
		{"unknown variable", "cases:\n  - name: a\n    env: {PROCESSOR_AGGREGATE_WINDOWS: 1m, PROCESSOR_TRANSFORMS: aggregate}\n    input: [{value: x}]\n    expect: {}\n",
			`:2: case "a": PROCESSOR_AGGREGATE_WINDOWS is not a setting; did you mean PROCESSOR_AGGREGATE_WINDOW?`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code, path := testRun(t, nil, c.doc)
			if code != exitConfig || stdout != "" || !strings.HasPrefix(stderr, "processor: "+path) ||
				!strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, one line with %s and %q", code, stdout, stderr, path, c.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code, _ := runCommand([]string{"test"}, transform.Default, &stdout, &stderr); code != exitConfig || !strings.Contains(stderr.String(), "usage: processor test FILE") {
		t.Errorf("no file: exit %d, stderr %q", code, stderr.String())
	}
	if code := runTest([]string{filepath.Join(t.TempDir(), "missing.yaml")}, transform.Default, &stdout, &stderr); code != exitConfig {
		t.Errorf("a missing file: exit %d, want 2", code)
	}
}
