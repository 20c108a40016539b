package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform"
)

// windowedSamples are JSON sample lines of key k at the given
// milliseconds.
func windowedSamples(at ...int64) string {
	var b strings.Builder
	for _, ms := range at {
		fmt.Fprintf(&b, `{"key":"k","value":"{}","timestamp":%d}`+"\n", ms)
	}
	return b.String()
}

// An aggregate count in 10s tumbling windows with EMIT=close and 2s of
// grace: no input has outputs of its own; the window [0,10s) closes, with
// its count of 3, in the transaction of the first input whose stream time
// reaches 12s, not before; the input at 9s that comes after that is late:
// dropped and counted (late, not filtered), its window never emitted
// again; the window [10s,20s) is still open at the end of the input and is
// not emitted, as the processor would not emit it yet.
func TestTryWindowCloses(t *testing.T) {
	env := map[string]string{"TRANSFORMS": "aggregate", "AGGREGATE_WINDOW": "10s", "AGGREGATE_GRACE": "2s",
		"AGGREGATE_EMIT": "close", "STATE_DIR": t.TempDir()}
	lines, stderr, code := tryRun(t, transform.Default, env, windowedSamples(1000, 5000, 9000, 11000, 12000, 9500, 15000))
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
	}
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7: %s", len(lines), asJSON(lines))
	}
	for i, l := range lines {
		if len(l.Outputs) != 0 {
			t.Errorf("input %d has outputs %s, want none (EMIT=close)", i, asJSON(l.Outputs))
		}
		if i != 4 && len(l.Closed) != 0 {
			t.Errorf("input %d closed %s, want nothing", i, asJSON(l.Closed))
		}
		if l.Late != (i == 5) {
			t.Errorf("input %d late %v, want %v", i, l.Late, i == 5)
		}
		if l.Filtered != (i != 5) {
			t.Errorf("input %d filtered %v, want %v", i, l.Filtered, i != 5)
		}
	}
	closed := lines[4].Closed
	want := `{"key":"k","value":3,"window_start":"1970-01-01T00:00:00Z","window_end":"1970-01-01T00:00:10Z"}`
	if len(closed) != 1 || closed[0].Value == nil || *closed[0].Value != want {
		t.Fatalf("input at 12s closed %s, want one window of value %s", asJSON(closed), want)
	}
	if *closed[0].Key != "k@0" || closed[0].Topic != "try-output" {
		t.Errorf("closed record %s, want key k@0 to try-output", asJSON(closed[0]))
	}
}

// With PROCESSOR_LATE_TOPIC the late input is written there with the
// processor.late.* headers, as the processor writes it.
func TestTryWindowLateTopic(t *testing.T) {
	env := map[string]string{"TRANSFORMS": "aggregate", "AGGREGATE_WINDOW": "10s", "AGGREGATE_EMIT": "close",
		"LATE_TOPIC": "late", "STATE_DIR": t.TempDir()}
	lines, stderr, code := tryRun(t, transform.Default, env, windowedSamples(1000, 10000, 2000))
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
	}
	if len(lines[1].Closed) != 1 {
		t.Errorf("input at 10s closed %s, want the window [0,10s)", asJSON(lines[1].Closed))
	}
	l := lines[2]
	if !l.Late || len(l.Outputs) != 1 || l.Outputs[0].Topic != "late" {
		t.Fatalf("late input %s, want late and one output to the topic late", asJSON(l))
	}
	var store string
	for _, h := range l.Outputs[0].Headers {
		if h.Key == "processor.late.store" {
			store = *h.Value
		}
	}
	if store == "" {
		t.Errorf("late output headers %s, want processor.late.store", asJSON(l.Outputs[0].Headers))
	}
}
