package config_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// clearEnv removes every PROCESSOR_* variable for the duration of the test,
// so the host environment cannot leak into it.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, config.Prefix+"_") {
			unsetenv(t, k)
		}
	}
}

// unsetenv removes k for the duration of the test (t.Setenv restores it).
func unsetenv(t *testing.T, k string) {
	t.Helper()
	t.Setenv(k, "")
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}

// minimalEnv is the smallest valid environment, by tag.
var minimalEnv = map[string]string{
	"BROKERS":      "kafka-1:9092",
	"GROUP":        "orders-enricher",
	"INPUT_TOPICS": "orders,refunds",
	"OUTPUT_TOPIC": "orders-enriched",
}

// setEnv sets minimalEnv, then applies set (by tag) and removes unset.
func setEnv(t *testing.T, set map[string]string, unset ...string) {
	t.Helper()
	clearEnv(t)
	env := map[string]string{}
	for k, v := range minimalEnv {
		env[k] = v
	}
	for k, v := range set {
		env[k] = v
	}
	for _, k := range unset {
		delete(env, k)
	}
	for k, v := range env {
		t.Setenv(config.EnvName(k), v)
	}
}

func TestLoadDefaults(t *testing.T) {
	setEnv(t, nil)
	c, err := config.Load("host-1")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &config.Config{
		Brokers:                     []string{"kafka-1:9092"},
		EmbeddedBroker:              false,
		EmbeddedBrokerAddr:          "127.0.0.1:9092",
		EmbeddedBrokerDir:           "./data/broker",
		EmbeddedBrokerPartitions:    6,
		Sink:                        "kafka",
		Group:                       "orders-enricher",
		InputTopics:                 []string{"orders", "refunds"},
		OutputTopic:                 "orders-enriched",
		TransactionalID:             "orders-enricher-host-1",
		ClientID:                    "processor-orders-enricher-host-1",
		Compression:                 "snappy",
		SASLOAuthClientAuth:         "basic",
		Linger:                      10 * time.Millisecond,
		FetchMaxBytes:               50 << 20,
		StartOffset:                 "earliest",
		Transforms:                  []string{"identity"},
		CommitInterval:              100 * time.Millisecond,
		MaxRecordsPerTxn:            100000,
		MaxTxnBytes:                 64 << 20,
		MaxOutputBytesPerRecord:     16 << 20,
		SessionTimeout:              45 * time.Second,
		TransactionTimeout:          40 * time.Second,
		HTTPAddr:                    ":8080",
		LogLevel:                    "info",
		LogFormat:                   "json",
		StatusHistory:               15 * time.Minute,
		ProgressInterval:            5 * time.Second,
		LineageHeaders:              "compact",
		OnError:                     "fail",
		Guarantee:                   "exactly_once",
		MaxRetries:                  3,
		MaxFutureSkew:               time.Minute,
		MaxCrashAttempts:            3,
		Ordering:                    "partition",
		StateDir:                    "./data/state",
		StateCacheBytes:             64 << 20,
		RepartitionPurgeInterval:    30 * time.Second,
		KeyFormat:                   "raw",
		ValueFormat:                 "raw",
		OutputSchemaRefreshInterval: time.Minute,
		KeySubjectStrategy:          "topic",
		ValueSubjectStrategy:        "topic",
		EmbeddedSchemaRegistryAddr:  "127.0.0.1:8081",
		EmbeddedSchemaRegistryDir:   "./data/registry",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestLoadValid(t *testing.T) {
	tests := []struct {
		name  string
		set   map[string]string
		unset []string
		host  string
		check func(t *testing.T, c *config.Config)
	}{
		{
			name: "default transactional id is group-hostname",
			host: "pod-7",
			check: func(t *testing.T, c *config.Config) {
				if c.TransactionalID != "orders-enricher-pod-7" {
					t.Errorf("TransactionalID = %q, want orders-enricher-pod-7", c.TransactionalID)
				}
			},
		},
		{
			name: "explicit transactional id wins",
			set:  map[string]string{"TRANSACTIONAL_ID": "enricher-0"},
			host: "pod-7",
			check: func(t *testing.T, c *config.Config) {
				if c.TransactionalID != "enricher-0" {
					t.Errorf("TransactionalID = %q, want enricher-0", c.TransactionalID)
				}
			},
		},
		{
			name:  "embedded broker makes brokers optional",
			set:   map[string]string{"EMBEDDED_BROKER": "true"},
			unset: []string{"BROKERS"},
			host:  "h",
			check: func(t *testing.T, c *config.Config) {
				if !c.EmbeddedBroker || len(c.Brokers) != 0 {
					t.Errorf("EmbeddedBroker = %v, Brokers = %q", c.EmbeddedBroker, c.Brokers)
				}
				if c.EmbeddedBrokerAddr != "127.0.0.1:9092" || c.EmbeddedBrokerDir != "./data/broker" || c.EmbeddedBrokerPartitions != 6 {
					t.Errorf("embedded defaults: %q %q %d", c.EmbeddedBrokerAddr, c.EmbeddedBrokerDir, c.EmbeddedBrokerPartitions)
				}
			},
		},
		{
			name: "embedded broker with its own settings",
			set: map[string]string{"EMBEDDED_BROKER": "1", "EMBEDDED_BROKER_ADDR": ":19092",
				"EMBEDDED_BROKER_DIR": "/tmp/b", "EMBEDDED_BROKER_PARTITIONS": "1000"},
			unset: []string{"BROKERS"},
			host:  "h",
			check: func(t *testing.T, c *config.Config) {
				if c.EmbeddedBrokerAddr != ":19092" || c.EmbeddedBrokerDir != "/tmp/b" || c.EmbeddedBrokerPartitions != 1000 {
					t.Errorf("embedded: %q %q %d", c.EmbeddedBrokerAddr, c.EmbeddedBrokerDir, c.EmbeddedBrokerPartitions)
				}
			},
		},
		{
			name: "several brokers, IPv6, aliases in transforms",
			set: map[string]string{"BROKERS": "kafka-1:9092,10.0.0.2:9093,[::1]:9094",
				"TRANSFORMS": "jq@first,route,jq@second", "INSTANCE_ID": "member-1"},
			host: "h",
			check: func(t *testing.T, c *config.Config) {
				if !reflect.DeepEqual(c.Brokers, []string{"kafka-1:9092", "10.0.0.2:9093", "[::1]:9094"}) {
					t.Errorf("Brokers = %q", c.Brokers)
				}
				if !reflect.DeepEqual(c.Transforms, []string{"jq@first", "route", "jq@second"}) {
					t.Errorf("Transforms = %q", c.Transforms)
				}
				if c.InstanceID != "member-1" {
					t.Errorf("InstanceID = %q", c.InstanceID)
				}
			},
		},
		{
			name: "every tunable at an accepted bound",
			set: map[string]string{"COMMIT_INTERVAL": "1ns", "MAX_RECORDS_PER_TXN": "10000000",
				"SESSION_TIMEOUT": "30m", "TRANSACTION_TIMEOUT": "15m", "HTTP_ADDR": "127.0.0.1:0",
				"LOG_LEVEL": "debug", "LOG_FORMAT": "text", "PROGRESS_INTERVAL": "0s"},
			host: "h",
			check: func(t *testing.T, c *config.Config) {
				if c.CommitInterval != 1 || c.MaxRecordsPerTxn != 10_000_000 || c.SessionTimeout != 30*time.Minute ||
					c.TransactionTimeout != 15*time.Minute || c.HTTPAddr != "127.0.0.1:0" ||
					c.LogLevel != "debug" || c.LogFormat != "text" || c.ProgressInterval != 0 {
					t.Errorf("got %+v", c)
				}
			},
		},
		{
			name: "lower bounds",
			set: map[string]string{"MAX_RECORDS_PER_TXN": "1", "SESSION_TIMEOUT": "6s",
				"TRANSACTION_TIMEOUT": "5s", "COMMIT_INTERVAL": "4999ms"},
			host: "h",
			check: func(t *testing.T, c *config.Config) {
				if c.MaxRecordsPerTxn != 1 || c.SessionTimeout != 6*time.Second || c.TransactionTimeout != 5*time.Second {
					t.Errorf("got %+v", c)
				}
			},
		},
		{
			name: "each log level",
			set:  map[string]string{"LOG_LEVEL": "warn"},
			host: "h",
			check: func(t *testing.T, c *config.Config) {
				if c.LogLevel != "warn" {
					t.Errorf("LogLevel = %q", c.LogLevel)
				}
			},
		},
		{
			name: "error log level",
			set:  map[string]string{"LOG_LEVEL": "error"},
			host: "h",
			check: func(t *testing.T, c *config.Config) {
				if c.LogLevel != "error" {
					t.Errorf("LogLevel = %q", c.LogLevel)
				}
			},
		},
		{
			name: "topic names with every allowed character",
			set:  map[string]string{"INPUT_TOPICS": "a.b_c-D9", "OUTPUT_TOPIC": strings.Repeat("x", 249)},
			host: "h",
			check: func(t *testing.T, c *config.Config) {
				if c.InputTopics[0] != "a.b_c-D9" || len(c.OutputTopic) != 249 {
					t.Errorf("topics %q %q", c.InputTopics, c.OutputTopic)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.set, tt.unset...)
			c, err := config.Load(tt.host)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

// TestLoadReadsOnlyPrefixedVariables checks that the unprefixed names of the
// settings (LOG_LEVEL, GROUP, ...), which other software commonly sets, are
// not read in place of the PROCESSOR_* ones.
func TestLoadReadsOnlyPrefixedVariables(t *testing.T) {
	setEnv(t, nil)
	for k, v := range map[string]string{
		"LOG_LEVEL": "DEBUG", "LOG_FORMAT": "logfmt", "HTTP_ADDR": "nonsense",
		"COMMIT_INTERVAL": "soon", "TRANSACTIONAL_ID": "someone-else", "TRANSFORMS": "nope",
		"EMBEDDED_BROKER": "maybe", "SESSION_TIMEOUT": "1s",
	} {
		t.Setenv(k, v)
	}
	c, err := config.Load("h")
	if err != nil {
		t.Fatalf("Load read an unprefixed variable: %v", err)
	}
	if c.LogLevel != "info" || c.LogFormat != "json" || c.HTTPAddr != ":8080" || c.CommitInterval != 100*time.Millisecond ||
		c.TransactionalID != "orders-enricher-h" || !reflect.DeepEqual(c.Transforms, []string{"identity"}) ||
		c.EmbeddedBroker || c.SessionTimeout != 45*time.Second {
		t.Errorf("unprefixed variables leaked into the config: %+v", c)
	}

	// A required setting is not satisfied by its unprefixed name either.
	unsetenv(t, config.EnvName("GROUP"))
	t.Setenv("GROUP", "other-group")
	_, err = config.Load("h")
	var cerr *settings.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_GROUP" || !cerr.Unset {
		t.Errorf("Load with only GROUP set: err = %v, want PROCESSOR_GROUP unset", err)
	}
}

func TestLoadErrors(t *testing.T) {
	topicRule := "topic names use only a-z A-Z 0-9 . _ -, at most 249 characters"
	tests := []struct {
		name  string
		set   map[string]string
		unset []string
		// wantVar is the tag of the variable the error names.
		wantVar string
		// wantValue is the value quoted in the message; unset when empty.
		wantValue string
		unsetErr  bool
		// wantForm is a part of the expected form the message must contain.
		wantForm string
	}{
		// Required settings.
		{name: "missing brokers", unset: []string{"BROKERS"}, wantVar: "BROKERS", unsetErr: true,
			wantForm: "host:port seed brokers"},
		{name: "missing brokers suggests embedded broker", unset: []string{"BROKERS"}, wantVar: "BROKERS", unsetErr: true,
			wantForm: "PROCESSOR_EMBEDDED_BROKER=true"},
		{name: "empty brokers", set: map[string]string{"BROKERS": ""}, wantVar: "BROKERS", unsetErr: true,
			wantForm: "host:port"},
		{name: "missing group", unset: []string{"GROUP"}, wantVar: "GROUP", unsetErr: true,
			wantForm: "consumer group id"},
		{name: "missing input topics", unset: []string{"INPUT_TOPICS"}, wantVar: "INPUT_TOPICS", unsetErr: true,
			wantForm: "comma-separated topic names"},
		{name: "missing output topic", unset: []string{"OUTPUT_TOPIC"}, wantVar: "OUTPUT_TOPIC", unsetErr: true,
			wantForm: "a topic name"},
		{name: "empty transforms", set: map[string]string{"TRANSFORMS": ""}, wantVar: "TRANSFORMS", unsetErr: true,
			wantForm: "comma-separated transform names"},

		// Brokers.
		{name: "broker without port", set: map[string]string{"BROKERS": "kafka-1"}, wantVar: "BROKERS",
			wantValue: "kafka-1", wantForm: "host:port"},
		{name: "second broker without port", set: map[string]string{"BROKERS": "kafka-1:9092,kafka-2"}, wantVar: "BROKERS",
			wantValue: "kafka-1:9092,kafka-2", wantForm: "host:port"},
		{name: "broker with empty port", set: map[string]string{"BROKERS": "kafka-1:"}, wantVar: "BROKERS",
			wantValue: "kafka-1:", wantForm: "host:port"},
		{name: "broker without host", set: map[string]string{"BROKERS": ":9092"}, wantVar: "BROKERS",
			wantValue: ":9092", wantForm: "host:port"},
		{name: "broker with named port", set: map[string]string{"BROKERS": "kafka-1:kafka"}, wantVar: "BROKERS",
			wantValue: "kafka-1:kafka", wantForm: "host:port"},
		{name: "broker list with trailing comma", set: map[string]string{"BROKERS": "kafka-1:9092,"}, wantVar: "BROKERS",
			wantValue: "kafka-1:9092,", wantForm: "host:port"},

		// Topics.
		{name: "input topic with slash", set: map[string]string{"INPUT_TOPICS": "orders,bad/topic"}, wantVar: "INPUT_TOPICS",
			wantValue: "orders,bad/topic", wantForm: topicRule},
		{name: "input topic with space", set: map[string]string{"INPUT_TOPICS": "orders, refunds"}, wantVar: "INPUT_TOPICS",
			wantValue: "orders, refunds", wantForm: topicRule},
		{name: "input topic dot-dot", set: map[string]string{"INPUT_TOPICS": ".."}, wantVar: "INPUT_TOPICS",
			wantValue: "..", wantForm: topicRule},
		{name: "input topic too long", set: map[string]string{"INPUT_TOPICS": strings.Repeat("t", 250)}, wantVar: "INPUT_TOPICS",
			wantValue: strings.Repeat("t", 250), wantForm: topicRule},
		{name: "output topic with colon", set: map[string]string{"OUTPUT_TOPIC": "out:put"}, wantVar: "OUTPUT_TOPIC",
			wantValue: "out:put", wantForm: topicRule},
		{name: "output topic with newline is quoted", set: map[string]string{"OUTPUT_TOPIC": "out\nput"}, wantVar: "OUTPUT_TOPIC",
			wantValue: "out\nput", wantForm: topicRule},
		{name: "output topic equals an input topic", set: map[string]string{"OUTPUT_TOPIC": "refunds"}, wantVar: "OUTPUT_TOPIC",
			wantValue: "refunds", wantForm: "not also in PROCESSOR_INPUT_TOPICS"},

		// Values that do not parse.
		{name: "unparsable commit interval", set: map[string]string{"COMMIT_INTERVAL": "fast"}, wantVar: "COMMIT_INTERVAL",
			wantValue: "fast", wantForm: "a Go duration such as 100ms or 1s"},
		{name: "duration without unit", set: map[string]string{"PROGRESS_INTERVAL": "5"}, wantVar: "PROGRESS_INTERVAL",
			wantValue: "5", wantForm: "a Go duration such as 5s"},
		{name: "empty session timeout", set: map[string]string{"SESSION_TIMEOUT": ""}, wantVar: "SESSION_TIMEOUT",
			wantValue: "", wantForm: "a Go duration from 6s to 30m"},
		{name: "unparsable transaction timeout", set: map[string]string{"TRANSACTION_TIMEOUT": "40 s"}, wantVar: "TRANSACTION_TIMEOUT",
			wantValue: "40 s", wantForm: "at most the brokers' transaction.max.timeout.ms (15m by default)"},
		{name: "unparsable max records", set: map[string]string{"MAX_RECORDS_PER_TXN": "lots"}, wantVar: "MAX_RECORDS_PER_TXN",
			wantValue: "lots", wantForm: "a whole number of records from 1 to 10000000"},
		{name: "fractional max records", set: map[string]string{"MAX_RECORDS_PER_TXN": "1.5"}, wantVar: "MAX_RECORDS_PER_TXN",
			wantValue: "1.5", wantForm: "a whole number of records"},
		{name: "overflowing max records", set: map[string]string{"MAX_RECORDS_PER_TXN": "99999999999999999999"}, wantVar: "MAX_RECORDS_PER_TXN",
			wantValue: "99999999999999999999", wantForm: "a whole number of records"},
		{name: "unparsable bool", set: map[string]string{"EMBEDDED_BROKER": "yes"}, wantVar: "EMBEDDED_BROKER",
			wantValue: "yes", wantForm: "true or false"},
		{name: "unparsable partitions", set: map[string]string{"EMBEDDED_BROKER_PARTITIONS": "six"}, wantVar: "EMBEDDED_BROKER_PARTITIONS",
			wantValue: "six", wantForm: "a partition count from 1 to 1000"},
		{name: "partitions overflow int32", set: map[string]string{"EMBEDDED_BROKER_PARTITIONS": "3000000000"}, wantVar: "EMBEDDED_BROKER_PARTITIONS",
			wantValue: "3000000000", wantForm: "a partition count from 1 to 1000"},

		// Range and relation checks.
		{name: "zero commit interval", set: map[string]string{"COMMIT_INTERVAL": "0"}, wantVar: "COMMIT_INTERVAL",
			wantValue: "0s", wantForm: "a Go duration such as 100ms or 1s"},
		{name: "negative commit interval", set: map[string]string{"COMMIT_INTERVAL": "-1s"}, wantVar: "COMMIT_INTERVAL",
			wantValue: "-1s", wantForm: "a Go duration such as 100ms or 1s"},
		{name: "zero max records", set: map[string]string{"MAX_RECORDS_PER_TXN": "0"}, wantVar: "MAX_RECORDS_PER_TXN",
			wantValue: "0", wantForm: "from 1 to 10000000"},
		{name: "negative max records", set: map[string]string{"MAX_RECORDS_PER_TXN": "-5"}, wantVar: "MAX_RECORDS_PER_TXN",
			wantValue: "-5", wantForm: "from 1 to 10000000"},
		{name: "too many max records", set: map[string]string{"MAX_RECORDS_PER_TXN": "10000001"}, wantVar: "MAX_RECORDS_PER_TXN",
			wantValue: "10000001", wantForm: "from 1 to 10000000"},
		{name: "session timeout below 6s", set: map[string]string{"SESSION_TIMEOUT": "5s", "TRANSACTION_TIMEOUT": "4s"}, wantVar: "SESSION_TIMEOUT",
			wantValue: "5s", wantForm: "a Go duration from 6s to 30m"},
		{name: "session timeout above 30m", set: map[string]string{"SESSION_TIMEOUT": "31m"}, wantVar: "SESSION_TIMEOUT",
			wantValue: "31m0s", wantForm: "a Go duration from 6s to 30m"},
		{name: "transaction timeout equals session timeout", set: map[string]string{"TRANSACTION_TIMEOUT": "45s"}, wantVar: "TRANSACTION_TIMEOUT",
			wantValue: "45s", wantForm: "a duration below PROCESSOR_SESSION_TIMEOUT (45s)"},
		{name: "transaction timeout above session timeout", set: map[string]string{"SESSION_TIMEOUT": "10s", "TRANSACTION_TIMEOUT": "20s"}, wantVar: "TRANSACTION_TIMEOUT",
			wantValue: "20s", wantForm: "a duration below PROCESSOR_SESSION_TIMEOUT (10s)"},
		{name: "zero transaction timeout", set: map[string]string{"TRANSACTION_TIMEOUT": "0s"}, wantVar: "TRANSACTION_TIMEOUT",
			wantValue: "0s", wantForm: "below PROCESSOR_SESSION_TIMEOUT"},
		{name: "negative transaction timeout", set: map[string]string{"TRANSACTION_TIMEOUT": "-1s"}, wantVar: "TRANSACTION_TIMEOUT",
			wantValue: "-1s", wantForm: "below PROCESSOR_SESSION_TIMEOUT"},
		{name: "commit interval equals transaction timeout", set: map[string]string{"COMMIT_INTERVAL": "40s"}, wantVar: "COMMIT_INTERVAL",
			wantValue: "40s", wantForm: "well below PROCESSOR_TRANSACTION_TIMEOUT (40s)"},
		{name: "commit interval above transaction timeout", set: map[string]string{"COMMIT_INTERVAL": "1m"}, wantVar: "COMMIT_INTERVAL",
			wantValue: "1m0s", wantForm: "well below PROCESSOR_TRANSACTION_TIMEOUT (40s)"},

		// Serving, logging.
		{name: "http addr without colon", set: map[string]string{"HTTP_ADDR": "8080"}, wantVar: "HTTP_ADDR",
			wantValue: "8080", wantForm: "host:port to serve /metrics"},
		{name: "http addr without port", set: map[string]string{"HTTP_ADDR": "localhost:"}, wantVar: "HTTP_ADDR",
			wantValue: "localhost:", wantForm: "host:port"},
		{name: "http addr named port", set: map[string]string{"HTTP_ADDR": ":http"}, wantVar: "HTTP_ADDR",
			wantValue: ":http", wantForm: "host:port"},
		{name: "empty http addr", set: map[string]string{"HTTP_ADDR": ""}, wantVar: "HTTP_ADDR",
			wantValue: "", wantForm: "host:port"},
		{name: "unknown log level", set: map[string]string{"LOG_LEVEL": "verbose"}, wantVar: "LOG_LEVEL",
			wantValue: "verbose", wantForm: "one of debug, info, warn, error"},
		{name: "upper-case log level", set: map[string]string{"LOG_LEVEL": "DEBUG"}, wantVar: "LOG_LEVEL",
			wantValue: "DEBUG", wantForm: "one of debug, info, warn, error"},
		{name: "unknown log format", set: map[string]string{"LOG_FORMAT": "xml"}, wantVar: "LOG_FORMAT",
			wantValue: "xml", wantForm: "json or text"},
		{name: "unknown ordering", set: map[string]string{"ORDERING": "offset"}, wantVar: "ORDERING",
			wantValue: "offset", wantForm: "partition or key"},
		{name: "upper-case ordering", set: map[string]string{"ORDERING": "KEY"}, wantVar: "ORDERING",
			wantValue: "KEY", wantForm: "partition or key"},
		{name: "negative progress interval", set: map[string]string{"PROGRESS_INTERVAL": "-1s"}, wantVar: "PROGRESS_INTERVAL",
			wantValue: "-1s", wantForm: "0 turns the progress line off"},
		{name: "status history too short", set: map[string]string{"STATUS_HISTORY": "30s"}, wantVar: "STATUS_HISTORY",
			wantValue: "30s", wantForm: "from 1m to 24h"},
		{name: "status history too long", set: map[string]string{"STATUS_HISTORY": "25h0m0s"}, wantVar: "STATUS_HISTORY",
			wantValue: "25h0m0s", wantForm: "from 1m to 24h"},
		{name: "unknown error policy", set: map[string]string{"ON_ERROR": "retry"}, wantVar: "ON_ERROR",
			wantValue: "retry", wantForm: "fail, dlq or skip"},
		{name: "unknown guarantee", set: map[string]string{"GUARANTEE": "exactly-once"}, wantVar: "GUARANTEE",
			wantValue: "exactly-once", wantForm: "exactly_once or at_least_once"},
		{name: "dlq policy without a topic", set: map[string]string{"ON_ERROR": "dlq"}, wantVar: "DLQ_TOPIC", unsetErr: true,
			wantForm: "PROCESSOR_ON_ERROR=dlq needs one"},
		{name: "dlq topic is an input", set: map[string]string{"ON_ERROR": "dlq", "DLQ_TOPIC": "orders"}, wantVar: "DLQ_TOPIC",
			wantValue: "orders", wantForm: "not also in PROCESSOR_INPUT_TOPICS"},
		{name: "dlq topic is the output topic", set: map[string]string{"ON_ERROR": "dlq", "DLQ_TOPIC": "orders-enriched"}, wantVar: "DLQ_TOPIC",
			wantValue: "orders-enriched", wantForm: "a topic other than PROCESSOR_OUTPUT_TOPIC"},
		{name: "dlq topic is the output topic without dlq", set: map[string]string{"DLQ_TOPIC": "orders-enriched"}, wantVar: "DLQ_TOPIC",
			wantValue: "orders-enriched", wantForm: "a topic other than PROCESSOR_OUTPUT_TOPIC"},
		{name: "dlq topic bad name", set: map[string]string{"ON_ERROR": "dlq", "DLQ_TOPIC": "dead letters"}, wantVar: "DLQ_TOPIC",
			wantValue: "dead letters", wantForm: "a topic name for dead letters"},
		{name: "transaction bytes too small", set: map[string]string{"MAX_TXN_BYTES": "1KiB"}, wantVar: "MAX_TXN_BYTES",
			wantValue: "1KiB", wantForm: "a size from 1MiB to 1GiB"},
		{name: "transaction bytes not a size", set: map[string]string{"MAX_TXN_BYTES": "lots"}, wantVar: "MAX_TXN_BYTES",
			wantValue: "lots", wantForm: "a size from 1MiB to 1GiB"},
		{name: "state cache too small", set: map[string]string{"STATE_CACHE_BYTES": "4MiB"}, wantVar: "STATE_CACHE_BYTES",
			wantValue: "4MiB", wantForm: "a size from 8MiB to 64GiB"},
		{name: "state cache too large", set: map[string]string{"STATE_CACHE_BYTES": "65GiB"}, wantVar: "STATE_CACHE_BYTES",
			wantValue: "65GiB", wantForm: "a size from 8MiB to 64GiB"},
		{name: "record output bytes too small", set: map[string]string{"MAX_OUTPUT_BYTES_PER_RECORD": "512KiB"}, wantVar: "MAX_OUTPUT_BYTES_PER_RECORD",
			wantValue: "512KiB", wantForm: "a size from 1MiB to 1GiB"},
		{name: "record output bytes too large", set: map[string]string{"MAX_OUTPUT_BYTES_PER_RECORD": "2GiB"}, wantVar: "MAX_OUTPUT_BYTES_PER_RECORD",
			wantValue: "2GiB", wantForm: "a size from 1MiB to 1GiB"},
		{name: "record output bytes not a size", set: map[string]string{"MAX_OUTPUT_BYTES_PER_RECORD": "lots"}, wantVar: "MAX_OUTPUT_BYTES_PER_RECORD",
			wantValue: "lots", wantForm: "a size from 1MiB to 1GiB"},
		{name: "negative retries", set: map[string]string{"MAX_RETRIES": "-1"}, wantVar: "MAX_RETRIES",
			wantValue: "-1", wantForm: "from 0 to 100"},
		{name: "retries not a number", set: map[string]string{"MAX_RETRIES": "few"}, wantVar: "MAX_RETRIES",
			wantValue: "few", wantForm: "from 0 to 100"},
		{name: "late topic an input", set: map[string]string{"LATE_TOPIC": "refunds"}, wantVar: "LATE_TOPIC",
			wantValue: "refunds", wantForm: "not an input, the output or the dead-letter topic"},
		{name: "late topic the output", set: map[string]string{"LATE_TOPIC": "orders-enriched"}, wantVar: "LATE_TOPIC",
			wantValue: "orders-enriched", wantForm: "not an input, the output or the dead-letter topic"},
		{name: "future skew below a second", set: map[string]string{"MAX_FUTURE_SKEW": "10ms"}, wantVar: "MAX_FUTURE_SKEW",
			wantValue: "10ms", wantForm: "from 1s to 8760h"},
		{name: "negative crash attempts", set: map[string]string{"MAX_CRASH_ATTEMPTS": "-1"}, wantVar: "MAX_CRASH_ATTEMPTS",
			wantValue: "-1", wantForm: "from 0 to 1000; 0 turns the count off"},
		{name: "crash attempts past the bound", set: map[string]string{"MAX_CRASH_ATTEMPTS": "1001"}, wantVar: "MAX_CRASH_ATTEMPTS",
			wantValue: "1001", wantForm: "from 0 to 1000"},
		{name: "crash attempts not a number", set: map[string]string{"MAX_CRASH_ATTEMPTS": "three"}, wantVar: "MAX_CRASH_ATTEMPTS",
			wantValue: "three", wantForm: "from 0 to 1000"},
		{name: "sink that is no name", set: map[string]string{"SINK": "My SQL"}, wantVar: "SINK",
			wantValue: "My SQL", wantForm: "kafka or the name of a sink"},
		{name: "postgres sink at least once", set: map[string]string{"SINK": "postgres", "POSTGRES_URL": "postgres://db/x", "GUARANTEE": "at_least_once"},
			wantVar: "GUARANTEE", wantValue: "at_least_once", wantForm: "exactly_once with PROCESSOR_SINK=postgres"},
		{name: "negative workers", set: map[string]string{"WORKERS": "-1"}, wantVar: "WORKERS",
			wantValue: "-1", wantForm: "from 0 to 256; 0 is one per CPU"},
		{name: "too many workers", set: map[string]string{"WORKERS": "257"}, wantVar: "WORKERS",
			wantValue: "257", wantForm: "from 0 to 256"},
		{name: "transform timeout not below transaction timeout", set: map[string]string{"TRANSFORM_TIMEOUT": "40s"}, wantVar: "TRANSFORM_TIMEOUT",
			wantValue: "40s", wantForm: "below PROCESSOR_TRANSACTION_TIMEOUT"},
		{name: "abort rate above one", set: map[string]string{"TEST_ABORT_RATE": "1.5"}, wantVar: "TEST_ABORT_RATE",
			wantValue: "1.5", wantForm: "a fraction from 0 to 1"},
		{name: "abort rate not a number", set: map[string]string{"TEST_ABORT_RATE": "often"}, wantVar: "TEST_ABORT_RATE",
			wantValue: "often", wantForm: "a fraction from 0 to 1"},
		{name: "lineage of no form", set: map[string]string{"LINEAGE_HEADERS": "maybe"}, wantVar: "LINEAGE_HEADERS",
			wantValue: "maybe", wantForm: "compact, legacy or off (true is compact, false is off)"},
		{name: "lineage binary", set: map[string]string{"LINEAGE_HEADERS": "binary"}, wantVar: "LINEAGE_HEADERS",
			wantValue: "binary", wantForm: "compact, legacy or off"},

		// Embedded broker.
		{name: "zero embedded partitions", set: map[string]string{"EMBEDDED_BROKER": "true", "EMBEDDED_BROKER_PARTITIONS": "0"},
			wantVar: "EMBEDDED_BROKER_PARTITIONS", wantValue: "0", wantForm: "a partition count from 1 to 1000"},
		{name: "too many embedded partitions", set: map[string]string{"EMBEDDED_BROKER": "true", "EMBEDDED_BROKER_PARTITIONS": "1001"},
			wantVar: "EMBEDDED_BROKER_PARTITIONS", wantValue: "1001", wantForm: "a partition count from 1 to 1000"},
		{name: "negative embedded partitions", set: map[string]string{"EMBEDDED_BROKER": "true", "EMBEDDED_BROKER_PARTITIONS": "-3"},
			wantVar: "EMBEDDED_BROKER_PARTITIONS", wantValue: "-3", wantForm: "a partition count from 1 to 1000"},
		{name: "bad embedded broker addr", set: map[string]string{"EMBEDDED_BROKER": "true", "EMBEDDED_BROKER_ADDR": "localhost"},
			wantVar: "EMBEDDED_BROKER_ADDR", wantValue: "localhost", wantForm: "host:port to listen on"},
		{name: "empty embedded broker dir", set: map[string]string{"EMBEDDED_BROKER": "true", "EMBEDDED_BROKER_DIR": ""},
			wantVar: "EMBEDDED_BROKER_DIR", unsetErr: true, wantForm: "a directory path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.set, tt.unset...)
			c, err := config.Load("h")
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want an error naming %s", c, config.EnvName(tt.wantVar))
			}
			if c != nil {
				t.Errorf("Load returned a config along with the error: %+v", c)
			}
			var cerr *settings.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v (%T) is not a *settings.Error", err, err)
			}
			if err != error(cerr) {
				t.Errorf("error is wrapped (%T), want the *settings.Error itself", err)
			}
			wantVar := config.EnvName(tt.wantVar)
			if cerr.Var != wantVar {
				t.Errorf("Var = %q, want %q (error: %v)", cerr.Var, wantVar, err)
			}
			if cerr.Unset != tt.unsetErr {
				t.Errorf("Unset = %v, want %v (error: %v)", cerr.Unset, tt.unsetErr, err)
			}
			if !tt.unsetErr && cerr.Value != tt.wantValue {
				t.Errorf("Value = %q, want %q", cerr.Value, tt.wantValue)
			}
			if cerr.Want.String() == "" {
				t.Errorf("Want is empty")
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			if !strings.Contains(msg, wantVar) {
				t.Errorf("message %q does not name %s", msg, wantVar)
			}
			if tt.unsetErr {
				if !strings.Contains(msg, "is not set") {
					t.Errorf("message %q does not say the variable is not set", msg)
				}
			} else if q := wantVar + "=" + strconv.Quote(tt.wantValue); !strings.Contains(msg, q) {
				t.Errorf("message %q does not quote the bad value as %s", msg, q)
			}
			if !strings.Contains(msg, tt.wantForm) {
				t.Errorf("message %q does not contain the expected form %q", msg, tt.wantForm)
			}
			if !strings.Contains(msg, cerr.Want.String()) {
				t.Errorf("message %q does not contain Want %q", msg, cerr.Want.String())
			}
		})
	}
}

// TestValidateEmbeddedSettingsIgnoredWhenOff documents that
// the embedded broker's settings are only checked when it is on.
func TestValidateEmbeddedSettingsIgnoredWhenOff(t *testing.T) {
	setEnv(t, map[string]string{"EMBEDDED_BROKER_PARTITIONS": "0", "EMBEDDED_BROKER_ADDR": "nope", "EMBEDDED_BROKER_DIR": ""})
	if _, err := config.Load("h"); err != nil {
		t.Fatalf("Load: %v", err)
	}
}

func TestEnvName(t *testing.T) {
	if got := config.EnvName("GROUP"); got != "PROCESSOR_GROUP" {
		t.Errorf("EnvName(GROUP) = %q", got)
	}
}

func TestHostname(t *testing.T) {
	if h := config.Hostname(); h == "" {
		t.Error("Hostname is empty")
	}
}

func TestVarsNamesEveryVariable(t *testing.T) {
	vars := config.Vars()
	for _, want := range []string{"PROCESSOR_BROKERS", "PROCESSOR_GROUP", "PROCESSOR_COMMIT_INTERVAL", "PROCESSOR_LINEAGE_HEADERS", "PROCESSOR_TEST_ABORT_RATE"} {
		if !slices.Contains(vars, want) {
			t.Errorf("Vars() lacks %s", want)
		}
	}
	if n := reflect.TypeFor[config.Config]().NumField(); len(vars) != n {
		t.Errorf("Vars() has %d names for %d fields", len(vars), n)
	}
}
