package app

import (
	"strings"
	"testing"
)

// Stateful cases: an aggregate's count goes on over the records of a
// case and starts again in the next one (state fresh per case); a dedupe
// drops the duplicate (filtered), and lets an id through again once its
// window has passed; windows with EMIT=close close as the
// inputs' timestamps move stream time past their end plus grace, in
// order, a window still open at the end of the input is not emitted, and
// a late input is reported late. All pass: exit 0.
func TestTestCommandStateful(t *testing.T) {
	doc := `
cases:
  - name: count
    env: {PROCESSOR_TRANSFORMS: aggregate}
    input:
      - {key: a, value: {}}
      - {key: b, value: {}}
      - {key: a, value: {}}
    expect:
      outputs:
        - {key: a, value: {key: a, value: 1}}
        - {key: b, value: {key: b, value: 1}}
        - {key: a, value: {key: a, value: 2}}
  - name: count again, from nothing
    env: {PROCESSOR_TRANSFORMS: aggregate}
    input:
      - {key: a, value: {}}
    expect:
      outputs:
        - {key: a, value: {key: a, value: 1}}
  - name: dedupe
    env: {PROCESSOR_TRANSFORMS: dedupe}
    input:
      - {key: o1, value: first, timestamp: 1000}
      - {key: o2, value: other, timestamp: 2000}
      - {key: o1, value: again, timestamp: 3000}
    expect:
      outputs:
        - {key: o1, value: first}
        - {key: o2, value: other}
      filtered: [2]
  - name: dedupe window ends
    env: {PROCESSOR_TRANSFORMS: dedupe, PROCESSOR_DEDUPE_WINDOW: 10s, PROCESSOR_DEDUPE_GRACE: 0s}
    input:
      - {key: o1, value: a, timestamp: 1000}
      - {key: o1, value: b, timestamp: 5000}
      - {key: o2, value: c, timestamp: 20000}
      - {key: o1, value: d, timestamp: 21000}
    expect:
      outputs: [{key: o1, value: a}, {key: o2, value: c}, {key: o1, value: d}]
      filtered: [1]
  - name: windows close
    env:
      PROCESSOR_TRANSFORMS: aggregate
      PROCESSOR_AGGREGATE_WINDOW: 10s
      PROCESSOR_AGGREGATE_GRACE: 2s
      PROCESSOR_AGGREGATE_EMIT: close
    input:
      - {key: a, value: {}, timestamp: 1000}
      - {key: b, value: {}, timestamp: 2000}
      - {key: a, value: {}, timestamp: 9000}
      - {key: a, value: {}, timestamp: 11000}
      - {key: a, value: {}, timestamp: 12000}
      - {key: a, value: {}, timestamp: 9500}
      - {key: b, value: {}, timestamp: 19000}
    expect:
      outputs:
        - {key: a@0, value: {key: a, value: 2, window_start: "1970-01-01T00:00:00Z", window_end: "1970-01-01T00:00:10Z"}}
        - jq: '.key == "b@0" and .value.value == 1'
      filtered: 6 # EMIT=close: no input has outputs of its own
      late: [5]
`
	stdout, stderr, code, _ := testRun(t, nil, doc)
	want := "PASS count\nPASS count again, from nothing\nPASS dedupe\nPASS dedupe window ends\nPASS windows close\n5 passed, 0 failed\n"
	if code != exitOK || stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit 0, stdout:\n%s", code, stdout, stderr, want)
	}
}

// Dead letters: a record the chain fails goes to PROCESSOR_DLQ_TOPIC
// under PROCESSOR_ON_ERROR=dlq, matched by input, stage and a part of its
// error; a mismatch is shown. Values compared byte for byte with exact.
// Under PROCESSOR_ON_ERROR=fail, an input that fails fails its case.
func TestTestCommandDeadLetters(t *testing.T) {
	doc := `
env:
  PROCESSOR_TRANSFORMS: jq
  PROCESSOR_JQ_EXPR: '.n + 1'
  PROCESSOR_ON_ERROR: dlq
  PROCESSOR_DLQ_TOPIC: dead
cases:
  - name: dead letter
    input:
      - {value: {n: 1}}
      - {value: {n: "x"}}
    expect:
      outputs: [{value: 2}]
      dead_letters:
        - {input: 1, stage: jq, error: cannot add}
  - name: wrong dead letter
    exact: true
    input:
      - {value: {n: 1.5}}
      - {value: not json}
    expect:
      outputs: [{value: '2.50'}]
      dead_letters:
        - {input: 0, error: nothing}
  - name: fails the run
    env: {PROCESSOR_ON_ERROR: fail}
    input:
      - {value: not json}
      - {value: {n: 1}}
    expect: {}
`
	stdout, stderr, code, _ := testRun(t, nil, doc)
	for _, w := range []string{"PASS dead letter\n", "FAIL wrong dead letter (",
		"    output 0 (of input 0, line 22): value differs\n        expected: value=2.50\n        got:      topic=try-output key=null value=2.5 ",
		"    dead letter 0:\n        expected: input 0, error containing \"nothing\"\n        got:      input 1, stage jq, error ",
		"FAIL fails the run (", "    input 0 failed the run: transform jq: the value is not JSON",
		"    input 1 was not processed: an earlier input failed the run\n",
		"1 passed, 2 failed\n"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	if code != exitRuntime {
		t.Errorf("exit %d, want 1; stderr %s", code, stderr)
	}
}
