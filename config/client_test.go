package config_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// The Kafka client's settings at each documented bound, and each of
// their forms, load.
func TestLoadAcceptsTheClientSettings(t *testing.T) {
	cases := []loadCase{
		{"16m transaction timeout, checked against the brokers at start", map[string]string{"SESSION_TIMEOUT": "20m", "TRANSACTION_TIMEOUT": "16m"},
			func(c *config.Config) bool { return c.TransactionTimeout == 16*time.Minute }},
		{"transaction timeout just below the longest session timeout", map[string]string{"SESSION_TIMEOUT": "30m", "TRANSACTION_TIMEOUT": "29m59s"},
			func(c *config.Config) bool { return c.TransactionTimeout == 30*time.Minute-time.Second }},
		{"explicit client id", map[string]string{"CLIENT_ID": "orders-enricher-0"},
			func(c *config.Config) bool { return c.ClientID == "orders-enricher-0" }},
		{"client id of 256 bytes", map[string]string{"CLIENT_ID": strings.Repeat("c", 256)},
			func(c *config.Config) bool { return len(c.ClientID) == 256 }},
		{"client id with spaces and non-ASCII letters", map[string]string{"CLIENT_ID": "commandes été 1"},
			func(c *config.Config) bool { return c.ClientID == "commandes été 1" }},
		{"client id defaults from the instance id", map[string]string{"INSTANCE_ID": "enricher-2"},
			func(c *config.Config) bool { return c.ClientID == "processor-orders-enricher-enricher-2" }},
		{"no linger", map[string]string{"LINGER": "0s"},
			func(c *config.Config) bool { return c.Linger == 0 }},
		{"longest linger", map[string]string{"LINGER": "1m"},
			func(c *config.Config) bool { return c.Linger == time.Minute }},
		{"smallest produce batch", map[string]string{"PRODUCE_BATCH_MAX_BYTES": "1KiB"},
			func(c *config.Config) bool { return c.ProduceBatchMaxBytes == 1<<10 }},
		{"largest produce batch", map[string]string{"PRODUCE_BATCH_MAX_BYTES": "100MiB"},
			func(c *config.Config) bool { return c.ProduceBatchMaxBytes == 100<<20 }},
		{"produce batch 0 is unset", map[string]string{"PRODUCE_BATCH_MAX_BYTES": "0"},
			func(c *config.Config) bool { return c.ProduceBatchMaxBytes == 0 }},
		{"smallest fetch", map[string]string{"FETCH_MAX_BYTES": "1MiB"},
			func(c *config.Config) bool { return c.FetchMaxBytes == 1<<20 }},
		{"largest fetch", map[string]string{"FETCH_MAX_BYTES": "104857600"},
			func(c *config.Config) bool { return c.FetchMaxBytes == 100<<20 }},
		{"rack", map[string]string{"RACK": "eu-west-1a"},
			func(c *config.Config) bool { return c.Rack == "eu-west-1a" }},
		{"rack of 512 bytes", map[string]string{"RACK": strings.Repeat("r", 512)},
			func(c *config.Config) bool { return len(c.Rack) == 512 }},
		{"start at the latest", map[string]string{"START_OFFSET": "latest"},
			func(c *config.Config) bool { return c.Start(time.Now()) == config.StartPosition{Latest: true} }},
		{"start a duration back", map[string]string{"START_OFFSET": "-90m"},
			func(c *config.Config) bool { return c.StartOffset == "-90m" }},
		{"start at a time with an offset", map[string]string{"START_OFFSET": "2026-01-02T15:04:05.250+01:00"},
			func(c *config.Config) bool { return c.StartOffset == "2026-01-02T15:04:05.250+01:00" }},
	}
	for _, name := range config.Compressions {
		cases = append(cases, loadCase{"compression " + name, map[string]string{"COMPRESSION": name},
			func(c *config.Config) bool { return c.Compression == name }})
	}
	testLoads(t, cases)
}

// A bad value of a client setting names its variable, quotes the value and
// gives the expected form, on one line.
func TestClientSettingErrors(t *testing.T) {
	for _, tt := range []struct {
		name, tag, value string
		set              map[string]string
		form             string
	}{
		{"unknown compression", "COMPRESSION", "brotli", nil, "none, gzip, snappy, lz4 or zstd"},
		{"upper-case compression", "COMPRESSION", "ZSTD", nil, "none, gzip, snappy, lz4 or zstd"},
		{"empty compression", "COMPRESSION", "", nil, "none, gzip, snappy, lz4 or zstd"},
		{"negative linger", "LINGER", "-1ms", nil, "a Go duration from 0 to 1m"},
		{"linger over a minute", "LINGER", "1m0.001s", nil, "a Go duration from 0 to 1m"},
		{"linger without unit", "LINGER", "10", nil, "a Go duration from 0 to 1m"},
		{"produce batch below 1KiB", "PRODUCE_BATCH_MAX_BYTES", "1023B", nil, "a size from 1KiB to 100MiB"},
		{"produce batch above 100MiB", "PRODUCE_BATCH_MAX_BYTES", "104857601B", nil, "a size from 1KiB to 100MiB"},
		{"produce batch in MB", "PRODUCE_BATCH_MAX_BYTES", "1MB", nil, "a size from 1KiB to 100MiB"},
		{"fetch below 1MiB", "FETCH_MAX_BYTES", "1048575B", nil, "a size from 1MiB to 100MiB"},
		{"fetch above 100MiB", "FETCH_MAX_BYTES", "101MiB", nil, "a size from 1MiB to 100MiB"},
		{"client id with a newline", "CLIENT_ID", "enricher\n0", nil, "without control characters"},
		{"client id of 257 bytes", "CLIENT_ID", strings.Repeat("c", 257), nil, "a client id of 1 to 256 bytes"},
		{"client id not UTF-8", "CLIENT_ID", "enricher\xff", nil, "a client id of 1 to 256 bytes"},
		{"rack with a tab", "RACK", "eu\twest", nil, "without control characters"},
		{"rack of 513 bytes", "RACK", strings.Repeat("r", 513), nil, "a rack or zone name of 1 to 512 bytes"},
		{"start offset a duration forward", "START_OFFSET", "1h", nil, "a negative Go duration such as -1h"},
		{"start offset no time back", "START_OFFSET", "-0s", nil, "a negative Go duration such as -1h"},
		{"start offset a bad duration", "START_OFFSET", "-1x", nil, "a negative Go duration such as -1h"},
		{"start offset a word", "START_OFFSET", "beginning", nil, "earliest, latest"},
		{"start offset upper case", "START_OFFSET", "EARLIEST", nil, "earliest, latest"},
		{"start offset a date alone", "START_OFFSET", "2026-01-02", nil, "an RFC 3339 time such as 2026-01-02T15:04:05Z"},
		{"start offset a time without zone", "START_OFFSET", "2026-01-02T15:04:05", nil, "an RFC 3339 time"},
		{"start offset an impossible month", "START_OFFSET", "2026-13-02T15:04:05Z", nil, "an RFC 3339 time"},
		// The default client ID is held to the same rule: a group too long
		// for it names the variable to set.
		{"derived client id too long", "CLIENT_ID", "processor-" + strings.Repeat("g", 250) + "-h",
			map[string]string{"GROUP": strings.Repeat("g", 250)}, "(default processor-<group>-<instance id or hostname>)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := map[string]string{tt.tag: tt.value}
			for k, v := range tt.set {
				set[k] = v
			}
			if tt.tag == "CLIENT_ID" && tt.set != nil {
				delete(set, "CLIENT_ID") // derived, not set
			}
			setEnv(t, set)
			c, err := config.Load("h")
			var cerr *settings.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load = %+v, %v; want a *settings.Error", c, err)
			}
			msg, name := err.Error(), config.EnvName(tt.tag)
			if cerr.Var != name || !strings.Contains(msg, name+"="+strconv.Quote(tt.value)) || !strings.Contains(msg, tt.form) ||
				strings.ContainsAny(msg, "\r\n") {
				t.Errorf("message %q: want one line naming %s, quoting %q, with %q", msg, name, tt.value, tt.form)
			}
		})
	}
}

// Every rule of the client's settings names a Config field with a
// variable and a form.
func TestClientRulesNameTheirVariables(t *testing.T) {
	for _, tag := range []string{"CLIENT_ID", "COMPRESSION", "LINGER", "PRODUCE_BATCH_MAX_BYTES", "FETCH_MAX_BYTES", "RACK", "START_OFFSET"} {
		var found *config.Var
		for _, v := range config.Reference() {
			if v.Name == config.EnvName(tag) {
				found = &v
			}
		}
		if found == nil || found.Form == "" || found.Doc == "" {
			t.Errorf("%s: reference %+v, want it listed with a form and a doc", config.EnvName(tag), found)
		}
	}
}

// The default client ID names the group and the instance: two pipelines
// (groups) on one host, or two instances of one pipeline, never share one.
func TestDefaultClientID(t *testing.T) {
	if got := config.DefaultClientID("orders", "", "pod-1"); got != "processor-orders-pod-1" {
		t.Errorf("without an instance id: %q", got)
	}
	if got := config.DefaultClientID("orders", "member-3", "pod-1"); got != "processor-orders-member-3" {
		t.Errorf("with an instance id: %q", got)
	}
	groups, hosts := []string{"orders", "refunds", "orders-eu"}, []string{"pod-0", "pod-1", "eu-pod-0"}
	for _, h := range hosts {
		for i, a := range groups {
			for _, b := range groups[i+1:] {
				if x, y := config.DefaultClientID(a, "", h), config.DefaultClientID(b, "", h); x == y {
					t.Errorf("groups %q and %q on %q share %q", a, b, h, x)
				}
			}
		}
	}
	for _, g := range groups {
		for i, a := range hosts {
			for _, b := range hosts[i+1:] {
				if x, y := config.DefaultClientID(g, "", a), config.DefaultClientID(g, "", b); x == y {
					t.Errorf("instances on %q and %q of %q share %q", a, b, g, x)
				}
				if x, y := config.DefaultClientID(g, a, "pod-9"), config.DefaultClientID(g, b, "pod-9"); x == y {
					t.Errorf("instances %q and %q of %q on one host share %q", a, b, g, x)
				}
			}
		}
	}
}

// Start reads each form of PROCESSOR_START_OFFSET: a duration back is
// counted from the time given, a time is kept to the millisecond.
func TestStartPosition(t *testing.T) {
	now := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		value string
		want  config.StartPosition
	}{
		{"earliest", config.StartPosition{}},
		{"latest", config.StartPosition{Latest: true}},
		{"-1h", config.StartPosition{At: now.Add(-time.Hour)}},
		{"-36h30m", config.StartPosition{At: now.Add(-36*time.Hour - 30*time.Minute)}},
		{"2026-01-02T15:04:05Z", config.StartPosition{At: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}},
		{"2026-01-02T16:04:05.5+01:00", config.StartPosition{At: time.Date(2026, 1, 2, 15, 4, 5, 5e8, time.UTC)}},
	} {
		c := config.Config{StartOffset: tt.value}
		got := c.Start(now)
		if got.Latest != tt.want.Latest || !got.At.Equal(tt.want.At) {
			t.Errorf("Start(%q) = %+v, want %+v", tt.value, got, tt.want)
		}
	}
}
