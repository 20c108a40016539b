package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/transform"
)

// tryRun runs `processor try args...` on input with env (names without
// the PROCESSOR_ prefix) set, and returns its lines, stderr and exit code.
func tryRun(t *testing.T, reg *transform.Registry, env map[string]string, input string, args ...string) ([]tryLine, string, int) {
	t.Helper()
	for k, v := range env {
		t.Setenv(config.EnvName(k), v)
	}
	var stdout, stderr bytes.Buffer
	code := runTry(args, reg, strings.NewReader(input), &stdout, &stderr)
	var lines []tryLine
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	for dec.More() {
		var l tryLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("an output line that is not a tryLine: %v", err)
		}
		lines = append(lines, l)
	}
	return lines, stderr.String(), code
}

// str is a pointer to s.
func str(s string) *string { return &s }

// lineageOf is the lineage header of an input at offset of topic
// partition 0, as printed.
func lineageOf(topic, offset string) []tryHeader {
	return []tryHeader{{Key: "processor.source", Value: str(topic + "/0/" + offset)}}
}

// legacyLineageOf is lineageOf in the legacy form of three headers.
func legacyLineageOf(topic, offset string) []tryHeader {
	return []tryHeader{{Key: "processor.source.topic", Value: str(topic)}, {Key: "processor.source.partition", Value: str("0")},
		{Key: "processor.source.offset", Value: str(offset)}}
}

// asJSON is v in JSON, for comparing and showing lines.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The identity chain on kcat-style lines: each line is one output to the
// output topic (try-output when PROCESSOR_OUTPUT_TOPIC is unset), with its
// key (none without a tab), its value and the lineage headers; offsets
// count from 0 on the first input topic (try when unset), blank lines are
// skipped, a value that is not UTF-8 is printed in base64. Exit 0.
func TestTryKVIdentity(t *testing.T) {
	lines, stderr, code := tryRun(t, transform.Default, map[string]string{"TRANSFORMS": "identity"}, "k1\tv1\n\nnokey\n\t\xff\xfe\n")
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
	}
	want := []tryLine{
		{Source: trySource{"try", 0, 0}, Outputs: []tryRecord{{Topic: "try-output", Key: str("k1"), Value: str("v1"), Headers: lineageOf("try", "0")}}},
		{Source: trySource{"try", 0, 1}, Outputs: []tryRecord{{Topic: "try-output", Value: str("nokey"), Headers: lineageOf("try", "1")}}},
		{Source: trySource{"try", 0, 2}, Outputs: []tryRecord{{Topic: "try-output", Key: str(""), ValueBase64: "//4=", Headers: lineageOf("try", "2")}}},
	}
	if asJSON(lines) != asJSON(want) {
		t.Errorf("got\n%s\nwant\n%s", asJSON(lines), asJSON(want))
	}
}

// PROCESSOR_LINEAGE_HEADERS=legacy prints the three headers of the legacy
// form instead of processor.source.
func TestTryLegacyLineage(t *testing.T) {
	lines, stderr, code := tryRun(t, transform.Default, map[string]string{"TRANSFORMS": "identity", "LINEAGE_HEADERS": "legacy"}, "k1\tv1\n")
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
	}
	want := []tryLine{{Source: trySource{"try", 0, 0}, Outputs: []tryRecord{{Topic: "try-output", Key: str("k1"), Value: str("v1"), Headers: legacyLineageOf("try", "0")}}}}
	if asJSON(lines) != asJSON(want) {
		t.Errorf("got\n%s\nwant\n%s", asJSON(lines), asJSON(want))
	}
}

// JSON lines from a file: headers as an object (in its order) or a list,
// topic, partition, offset and base64 fields honoured; offsets not given
// follow the previous one of their partition; the output topic and
// PROCESSOR_LINEAGE_HEADERS=false as configured.
func TestTryJSONFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "samples.jsonl")
	samples := `{"key":"a","value":"1","headers":{"z":"1","a":"2"},"topic":"orders","partition":2,"offset":7}
{"key_base64":"/w==","value":"2","headers":[{"key":"h","value":"x"},{"key":"h","value":"y"}],"topic":"orders","partition":2}
{"value":null,"timestamp":"2026-01-02T03:04:05Z"}
`
	if err := os.WriteFile(file, []byte(samples), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TRANSFORMS": "identity", "OUTPUT_TOPIC": "out", "INPUT_TOPICS": "orders,refunds", "LINEAGE_HEADERS": "false"}
	lines, stderr, code := tryRun(t, transform.Default, env, "", "-file", file)
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
	}
	want := []tryLine{
		{Source: trySource{"orders", 2, 7}, Outputs: []tryRecord{{Topic: "out", Key: str("a"), Value: str("1"),
			Headers: []tryHeader{{Key: "z", Value: str("1")}, {Key: "a", Value: str("2")}}}}},
		{Source: trySource{"orders", 2, 8}, Outputs: []tryRecord{{Topic: "out", KeyBase64: "/w==", Value: str("2"),
			Headers: []tryHeader{{Key: "h", Value: str("x")}, {Key: "h", Value: str("y")}}}}},
		{Source: trySource{"orders", 0, 0}, Outputs: []tryRecord{{Topic: "out", Headers: []tryHeader{}}}},
	}
	if asJSON(lines) != asJSON(want) {
		t.Errorf("got\n%s\nwant\n%s", asJSON(lines), asJSON(want))
	}
}

// A jq chain that filters and fails, then a route by header: under dlq
// the failing record's dead letter (error, stage, attempts and the record
// as written), under skip "skipped", under fail the failure and the
// records after it not processed; the exit code is 1 whenever a record
// failed, 0 when only outputs and filtered records came out.
func TestTryPolicies(t *testing.T) {
	base := map[string]string{"TRANSFORMS": "jq,route", "JQ_EXPR": "if .drop then empty else .n end",
		"ROUTE_HEADER": "dest", "ROUTE_DEFAULT": "out", "OUTPUT_TOPIC": "out", "INPUT_TOPICS": "in"}
	input := "k\t{\"n\":1}\nk\t{\"drop\":true}\nk\tnot json\nk\t{\"n\":2}\n"
	errText := "transform jq: the value is not JSON: invalid character 'o' in literal null (expecting 'u')"
	out := func(v, off string) []tryRecord {
		return []tryRecord{{Topic: "out", Key: str("k"), Value: str(v), Headers: lineageOf("in", off)}}
	}
	first := tryLine{Source: trySource{"in", 0, 0}, Outputs: out("1", "0")}
	filtered := tryLine{Source: trySource{"in", 0, 1}, Filtered: true}
	last := tryLine{Source: trySource{"in", 0, 3}, Outputs: out("2", "3")}
	dead := &tryDead{Error: errText, Stage: "jq", Attempts: 1, Record: tryRecord{Topic: "dlq", Key: str("k"), Value: str("not json"),
		Headers: append([]tryHeader{{Key: "processor.error", Value: str(errText)}, {Key: "processor.error.transform", Value: str("jq")},
			{Key: "processor.error.attempts", Value: str("1")}}, lineageOf("in", "2")...)}}
	for _, c := range []struct {
		policy string
		third  tryLine
		last   tryLine
	}{
		{"dlq", tryLine{Source: trySource{"in", 0, 2}, DeadLetter: dead}, last},
		{"skip", tryLine{Source: trySource{"in", 0, 2}, Skipped: true}, last},
		{"fail", tryLine{Source: trySource{"in", 0, 2}, Failed: &tryFailure{Error: errText}},
			tryLine{Source: trySource{"in", 0, 3}, NotProcessed: true}},
	} {
		t.Run(c.policy, func(t *testing.T) {
			env := map[string]string{"ON_ERROR": c.policy, "DLQ_TOPIC": "dlq", "LOG_LEVEL": "error"}
			for k, v := range base {
				env[k] = v
			}
			lines, stderr, code := tryRun(t, transform.Default, env, input, "-format", "kv")
			if code != exitRuntime {
				t.Errorf("exit %d, want 1; stderr %s", code, stderr)
			}
			want := []tryLine{first, filtered, c.third, c.last}
			if asJSON(lines) != asJSON(want) {
				t.Errorf("got\n%s\nwant\n%s", asJSON(lines), asJSON(want))
			}
		})
	}
	t.Run("routed", func(t *testing.T) {
		lines, stderr, code := tryRun(t, transform.Default, base, `{"key":"k","value":"{\"n\":3}","headers":{"dest":"elsewhere"}}`)
		if code != exitOK || len(lines) != 1 || len(lines[0].Outputs) != 1 || lines[0].Outputs[0].Topic != "elsewhere" {
			t.Errorf("exit %d, lines %s, want one output to elsewhere; stderr %s", code, asJSON(lines), stderr)
		}
	})
}

// Bad configuration and unreadable input exit 2 with one line naming the
// problem, and print nothing on stdout; the processor's required
// connection and group settings are not required.
func TestTryConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   map[string]string
		input string
		args  []string
		want  string
	}{
		{"unknown transform", map[string]string{"TRANSFORMS": "nosuch"}, "", nil, "PROCESSOR_TRANSFORMS="},
		{"transform setting", map[string]string{"TRANSFORMS": "jq", "JQ_EXPR": ".a |"}, "", nil, "PROCESSOR_JQ_EXPR="},
		{"dlq without topic", map[string]string{"ON_ERROR": "dlq"}, "", nil, "PROCESSOR_DLQ_TOPIC"},
		{"core setting", map[string]string{"COMMIT_INTERVAL": "soon"}, "", nil, "PROCESSOR_COMMIT_INTERVAL="},
		{"ordering", map[string]string{"ORDERING": "offset"}, "", nil, `PROCESSOR_ORDERING="offset" is invalid: want partition or key`},
		{"bad json", nil, "{\"value\":1}\n", nil, "sample line 1:"},
		{"unknown field", nil, "{\"vale\":\"x\"}\n", []string{"-format", "json"}, "sample line 1:"},
		{"offset going back", nil, "{\"offset\":5}\n{\"offset\":5}\n", nil, "sample line 2: offset 5"},
		{"missing file", nil, "", []string{"-file", "/nonexistent/samples"}, "-file:"},
		{"bad format", nil, "", []string{"-format", "csv"}, "usage: processor try"},
		{"topic not in -topics", map[string]string{"ON_ERROR": "dlq", "DLQ_TOPIC": "dlq"}, "k\tv\n", []string{"-topics", "try-output"},
			`PROCESSOR_DLQ_TOPIC="dlq" is invalid: want a topic in -topics`},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines, stderr, code := tryRun(t, transform.Default, c.env, c.input, c.args...)
			if code != exitConfig || len(lines) != 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, %d lines, stderr %q; want exit 2, nothing on stdout and one line with %q", code, len(lines), stderr, c.want)
			}
		})
	}
}

// runCommand hands `processor try` its arguments.
func TestTryCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code, handled := runCommand([]string{"try", "-format", "csv"}, transform.Default, &stdout, &stderr)
	if !handled || code != exitConfig || !strings.Contains(stderr.String(), "processor try") {
		t.Errorf("runCommand(try -format csv) = %d, %v, stderr %q; want 2 and the try usage", code, handled, stderr.String())
	}
}
