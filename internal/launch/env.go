// Package launch starts the processor binary as a subprocess for the tools
// and tests that drive it from outside (the fault drill, the benchmarks,
// the integration suite). Instance is a typed description of one
// processor: it renders the PROCESSOR_* environment the binary reads, in
// one place, so that a renamed or added setting changes here and not in
// every driver. Start runs a command with its logs captured in a file or a
// writer and watches it exit.
package launch

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Instance describes one processor process by its settings. A zero field
// is left unset, so the processor's default applies; Env renders the set
// ones as PROCESSOR_* variables.
type Instance struct {
	Brokers         []string // PROCESSOR_BROKERS, joined by commas
	Group           string   // PROCESSOR_GROUP
	InputTopics     []string // PROCESSOR_INPUT_TOPICS, joined by commas
	OutputTopic     string   // PROCESSOR_OUTPUT_TOPIC; unset for a run into a database
	TransactionalID string   // PROCESSOR_TRANSACTIONAL_ID: unique per instance, stable across its restarts
	InstanceID      string   // PROCESSOR_INSTANCE_ID: static group membership
	Guarantee       string   // PROCESSOR_GUARANTEE: exactly_once or at_least_once
	Sink            string   // PROCESSOR_SINK: kafka or postgres

	// EmbeddedBroker, set, runs the processor on a broker of its own in
	// place of Brokers: PROCESSOR_EMBEDDED_BROKER=true, listening at this
	// host:port (PROCESSOR_EMBEDDED_BROKER_ADDR), keeping its log in
	// EmbeddedBrokerDir (PROCESSOR_EMBEDDED_BROKER_DIR), its topics of
	// EmbeddedBrokerPartitions partitions
	// (PROCESSOR_EMBEDDED_BROKER_PARTITIONS).
	EmbeddedBroker           string
	EmbeddedBrokerDir        string
	EmbeddedBrokerPartitions int

	// Transforms is the chain (PROCESSOR_TRANSFORMS, joined by commas);
	// Settings are the plugins' own settings (a transform's, the sink's)
	// by full variable name, e.g. PROCESSOR_JQ_EXPR, rendered sorted by
	// name.
	Transforms []string
	Settings   map[string]string

	OnError  string // PROCESSOR_ON_ERROR: fail, dlq or skip
	DLQTopic string // PROCESSOR_DLQ_TOPIC

	CommitInterval     time.Duration // PROCESSOR_COMMIT_INTERVAL
	SessionTimeout     time.Duration // PROCESSOR_SESSION_TIMEOUT
	TransactionTimeout time.Duration // PROCESSOR_TRANSACTION_TIMEOUT
	ProgressInterval   time.Duration // PROCESSOR_PROGRESS_INTERVAL
	Workers            int           // PROCESSOR_WORKERS

	HTTPAddr  string // PROCESSOR_HTTP_ADDR: status, metrics and probes; 127.0.0.1:0 picks a free port
	LogFormat string // PROCESSOR_LOG_FORMAT: json or text
	LogLevel  string // PROCESSOR_LOG_LEVEL: debug, info, warn or error

	// Extra are more variables, NAME=value, rendered last: where one
	// names a variable a field sets too, it wins (os/exec keeps the last
	// of duplicate names).
	Extra []string
}

// Env renders the instance as NAME=value pairs: the fields that are set,
// in a fixed order, then Settings sorted by name, then Extra. It holds
// only what the instance says; Environ gives the base to put it on.
func (in Instance) Env() []string {
	var env []string
	str := func(name, v string) {
		if v != "" {
			env = append(env, name+"="+v)
		}
	}
	dur := func(name string, d time.Duration) {
		if d != 0 {
			str(name, d.String())
		}
	}
	num := func(name string, n int) {
		if n != 0 {
			str(name, strconv.Itoa(n))
		}
	}
	str("PROCESSOR_BROKERS", strings.Join(in.Brokers, ","))
	if in.EmbeddedBroker != "" {
		str("PROCESSOR_EMBEDDED_BROKER", "true")
	}
	str("PROCESSOR_EMBEDDED_BROKER_ADDR", in.EmbeddedBroker)
	str("PROCESSOR_EMBEDDED_BROKER_DIR", in.EmbeddedBrokerDir)
	num("PROCESSOR_EMBEDDED_BROKER_PARTITIONS", in.EmbeddedBrokerPartitions)
	str("PROCESSOR_GROUP", in.Group)
	str("PROCESSOR_INPUT_TOPICS", strings.Join(in.InputTopics, ","))
	str("PROCESSOR_OUTPUT_TOPIC", in.OutputTopic)
	str("PROCESSOR_TRANSACTIONAL_ID", in.TransactionalID)
	str("PROCESSOR_INSTANCE_ID", in.InstanceID)
	str("PROCESSOR_GUARANTEE", in.Guarantee)
	str("PROCESSOR_SINK", in.Sink)
	str("PROCESSOR_TRANSFORMS", strings.Join(in.Transforms, ","))
	str("PROCESSOR_ON_ERROR", in.OnError)
	str("PROCESSOR_DLQ_TOPIC", in.DLQTopic)
	dur("PROCESSOR_COMMIT_INTERVAL", in.CommitInterval)
	dur("PROCESSOR_SESSION_TIMEOUT", in.SessionTimeout)
	dur("PROCESSOR_TRANSACTION_TIMEOUT", in.TransactionTimeout)
	dur("PROCESSOR_PROGRESS_INTERVAL", in.ProgressInterval)
	num("PROCESSOR_WORKERS", in.Workers)
	str("PROCESSOR_HTTP_ADDR", in.HTTPAddr)
	str("PROCESSOR_LOG_FORMAT", in.LogFormat)
	str("PROCESSOR_LOG_LEVEL", in.LogLevel)
	names := make([]string, 0, len(in.Settings))
	for name := range in.Settings {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		env = append(env, name+"="+in.Settings[name])
	}
	return append(env, in.Extra...)
}

// Base says what a launched process's environment starts from, before
// the instance's variables.
type Base int

const (
	// PathOnly: PATH alone, so that nothing of the caller's environment
	// changes what the processor does (the drill, the tests).
	PathOnly Base = iota
	// Inherit: the caller's environment without its PROCESSOR_*
	// variables (HOME, TMPDIR, GOCOVERDIR and the like pass on).
	Inherit
)

// Environ returns the whole environment of a process started from base
// with the variables vars (Instance.Env, say) on top.
func Environ(base Base, vars ...string) []string {
	var env []string
	switch base {
	case PathOnly:
		env = []string{"PATH=" + os.Getenv("PATH")}
	case Inherit:
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PROCESSOR_") {
				env = append(env, kv)
			}
		}
	}
	return append(env, vars...)
}
