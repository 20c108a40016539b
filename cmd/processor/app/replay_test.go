package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/transform"
)

// TestReplayCommandLine: mistakes of the command line exit 2 with one
// line naming them, before anything connects; the flags fill the filter.
func TestReplayCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"replay", "-h"}, 0, "usage: processor replay"},
		{[]string{"replay", "-since", "yesterday"}, 2, `-since "yesterday": want an RFC 3339 time`},
		{[]string{"replay", "-until", "5"}, 2, `-until "5"`},
		{[]string{"replay", "-header", "novalue"}, 2, `-header "novalue": want NAME=VALUE`},
		{[]string{"replay", "-from", "10", "-to", "10"}, 2, "-to 10: want an offset above -from 10"},
		{[]string{"replay", "extra"}, 2, "unexpected arguments"},
	} {
		var out, errb bytes.Buffer
		code, handled := runCommand(tc.args, transform.Default, &out, &errb)
		if !handled || code != tc.code || !strings.Contains(errb.String(), tc.says) {
			t.Errorf("%v: exit %d (handled %v), stderr %q; want exit %d saying %q", tc.args, code, handled, errb.String(), tc.code, tc.says)
		}
	}
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	f, _, ok := parseReplayFlags([]string{"-since", "-2h", "-until", "2026-12-06T07:30:00Z", "-from", "3", "-to", "9",
		"-partition", "1", "-error", "boom", "-header", "processor.error.transform=jq", "-group", "g2"}, now, &bytes.Buffer{})
	want := now.Add(-2 * time.Hour)
	if !ok || !f.filter.Since.Equal(want) || !f.filter.Until.Equal(now.Add(-30*time.Minute)) || f.filter.From != 3 || f.filter.To != 9 ||
		f.filter.Partition != 1 || f.filter.Error != "boom" || f.filter.Header != "processor.error.transform" || f.filter.HeaderValue != "jq" || f.group != "g2" {
		t.Errorf("parsed %+v (ok %v)", f, ok)
	}
}

// TestReplayConfiguration: a replay needs the dead-letter topic, and a
// Kafka sink: exit 2 naming the variable otherwise.
func TestReplayConfiguration(t *testing.T) {
	base := map[string]string{"PROCESSOR_BROKERS": "127.0.0.1:1", "PROCESSOR_GROUP": "g", "PROCESSOR_INPUT_TOPICS": "in",
		"PROCESSOR_OUTPUT_TOPIC": "out", "PROCESSOR_ALLOW_UNKNOWN_VARIABLES": "true"}
	for _, tc := range []struct {
		set  map[string]string
		says string
	}{
		{nil, "PROCESSOR_DLQ_TOPIC"},
		{map[string]string{"PROCESSOR_DLQ_TOPIC": "dlq", "PROCESSOR_SINK": "postgres", "PROCESSOR_POSTGRES_URL": "postgres://u@127.0.0.1:1/db"}, "PROCESSOR_SINK"},
	} {
		for k, v := range base {
			t.Setenv(k, v)
		}
		for k, v := range tc.set {
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		if code, _ := runCommand([]string{"replay"}, transform.Default, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.says) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", tc.set, code, errb.String(), tc.says)
		}
	}
}
