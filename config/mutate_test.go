package config_test

// Tests that pin the exact limits of the settings: each documented bound
// is itself valid, so an off-by-one in Validate fails here. Mutation
// testing (make mutate, docs/testing.md) found them missing.

import (
	"os"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
)

func TestLoadAcceptsTheLimits(t *testing.T) {
	testLoads(t, []loadCase{
		{"one embedded partition", map[string]string{"EMBEDDED_BROKER": "true", "EMBEDDED_BROKER_PARTITIONS": "1"},
			func(c *config.Config) bool { return c.EmbeddedBrokerPartitions == 1 }},
		{"1000 embedded partitions", map[string]string{"EMBEDDED_BROKER": "true", "EMBEDDED_BROKER_PARTITIONS": "1000"},
			func(c *config.Config) bool { return c.EmbeddedBrokerPartitions == 1000 }},
		{"1MiB per transaction", map[string]string{"MAX_TXN_BYTES": "1MiB"},
			func(c *config.Config) bool { return c.MaxTxnBytes == 1<<20 }},
		{"1GiB per transaction", map[string]string{"MAX_TXN_BYTES": "1GiB"},
			func(c *config.Config) bool { return c.MaxTxnBytes == 1<<30 }},
		{"an 8MiB state cache", map[string]string{"STATE_CACHE_BYTES": "8MiB"},
			func(c *config.Config) bool { return c.StateCacheBytes == 8<<20 }},
		{"a 64GiB state cache", map[string]string{"STATE_CACHE_BYTES": "64GiB"},
			func(c *config.Config) bool { return c.StateCacheBytes == 64<<30 }},
		{"1MiB of outputs per record", map[string]string{"MAX_OUTPUT_BYTES_PER_RECORD": "1MiB"},
			func(c *config.Config) bool { return c.MaxOutputBytesPerRecord == 1<<20 }},
		{"1GiB of outputs per record", map[string]string{"MAX_OUTPUT_BYTES_PER_RECORD": "1GiB"},
			func(c *config.Config) bool { return c.MaxOutputBytesPerRecord == 1<<30 }},
		{"one record per transaction", map[string]string{"MAX_RECORDS_PER_TXN": "1"},
			func(c *config.Config) bool { return c.MaxRecordsPerTxn == 1 }},
		{"ten million records per transaction", map[string]string{"MAX_RECORDS_PER_TXN": "10000000"},
			func(c *config.Config) bool { return c.MaxRecordsPerTxn == 10_000_000 }},
		{"no retries", map[string]string{"MAX_RETRIES": "0"},
			func(c *config.Config) bool { return c.MaxRetries == 0 }},
		{"100 retries", map[string]string{"MAX_RETRIES": "100"},
			func(c *config.Config) bool { return c.MaxRetries == 100 }},
		{"no crash attempts counted", map[string]string{"MAX_CRASH_ATTEMPTS": "0"},
			func(c *config.Config) bool { return c.MaxCrashAttempts == 0 }},
		{"1000 crash attempts", map[string]string{"MAX_CRASH_ATTEMPTS": "1000"},
			func(c *config.Config) bool { return c.MaxCrashAttempts == 1000 }},
		{"workers by CPU", map[string]string{"WORKERS": "0"},
			func(c *config.Config) bool { return c.Workers == 0 }},
		{"256 workers", map[string]string{"WORKERS": "256"},
			func(c *config.Config) bool { return c.Workers == 256 }},
		{"ordering by partition", map[string]string{"ORDERING": "partition"},
			func(c *config.Config) bool { return c.Ordering == "partition" }},
		{"ordering by key", map[string]string{"ORDERING": "key"},
			func(c *config.Config) bool { return c.Ordering == "key" }},
		{"abort rate 0", map[string]string{"TEST_ABORT_RATE": "0"},
			func(c *config.Config) bool { return c.TestAbortRate == 0 }},
		{"abort rate 1", map[string]string{"TEST_ABORT_RATE": "1"},
			func(c *config.Config) bool { return c.TestAbortRate == 1 }},
		{"shortest session timeout", map[string]string{"SESSION_TIMEOUT": "6s", "TRANSACTION_TIMEOUT": "5s"},
			func(c *config.Config) bool { return c.SessionTimeout.String() == "6s" }},
		{"longest session timeout", map[string]string{"SESSION_TIMEOUT": "30m"},
			func(c *config.Config) bool { return c.SessionTimeout.String() == "30m0s" }},
		{"longest transaction timeout", map[string]string{"SESSION_TIMEOUT": "30m", "TRANSACTION_TIMEOUT": "15m"},
			func(c *config.Config) bool { return c.TransactionTimeout.String() == "15m0s" }},
		{"transform timeout just below the transaction timeout", map[string]string{"TRANSACTION_TIMEOUT": "40s", "TRANSFORM_TIMEOUT": "39.999s"},
			func(c *config.Config) bool { return c.TransformTimeout.String() == "39.999s" }},
		{"shortest status history", map[string]string{"STATUS_HISTORY": "1m"},
			func(c *config.Config) bool { return c.StatusHistory.String() == "1m0s" }},
		{"longest status history", map[string]string{"STATUS_HISTORY": "24h"},
			func(c *config.Config) bool { return c.StatusHistory.String() == "24h0m0s" }},
		{"progress line off", map[string]string{"PROGRESS_INTERVAL": "0s"},
			func(c *config.Config) bool { return c.ProgressInterval == 0 }},
		{"dead letters to a topic of their own", map[string]string{"ON_ERROR": "dlq", "DLQ_TOPIC": "orders-dlq"},
			func(c *config.Config) bool { return c.OnError == "dlq" && c.DLQTopic == "orders-dlq" }},
		{"a dead-letter topic under another policy", map[string]string{"ON_ERROR": "skip", "DLQ_TOPIC": "orders-dlq"},
			func(c *config.Config) bool { return c.DLQTopic == "orders-dlq" }},
		{"topic name of 249 characters", map[string]string{"OUTPUT_TOPIC": strings.Repeat("o", 249)},
			func(c *config.Config) bool { return len(c.OutputTopic) == 249 }},
	})
}

// loadCase is a setting that Load accepts, and check tells whether the
// Config shows it.
type loadCase struct {
	name  string
	set   map[string]string
	check func(c *config.Config) bool
}

// testLoads runs each case as a subtest: Load with the case's variables
// set (over minimalEnv) succeeds, and check accepts the Config.
func testLoads(t *testing.T, tests []loadCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.set)
			c, err := config.Load("h")
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !tt.check(c) {
				t.Errorf("Load gave %+v", c)
			}
		})
	}
}

// Hostname is the machine's host name when it can be read.
func TestHostnameIsTheMachines(t *testing.T) {
	want, err := os.Hostname()
	if err != nil || want == "" {
		t.Skipf("os.Hostname: %q, %v", want, err)
	}
	if got := config.Hostname(); got != want {
		t.Errorf("Hostname() = %q, want %q", got, want)
	}
}
