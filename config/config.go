// Package config holds the processor's configuration: the PROCESSOR_*
// environment variables, their defaults, and the validation that runs before
// anything connects to Kafka. It is the only package that reads the
// environment; everything below cmd/ receives a validated Config.
package config

import (
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/streamproc/processor/internal/bytesize"
	"github.com/streamproc/processor/internal/topic"
)

// Prefix is the prefix of every environment variable the processor reads.
const Prefix = "PROCESSOR"

// Config is the processor's whole configuration. Field tags name the
// environment variable (Prefix + "_" + tag), its default, and in `desc` the
// expected form, which error messages quote.
type Config struct {
	Brokers            []string `envconfig:"BROKERS" desc:"comma-separated host:port seed brokers, e.g. kafka-1:9092,kafka-2:9092"`
	EmbeddedBroker     bool     `envconfig:"EMBEDDED_BROKER" default:"false" desc:"true or false"`
	EmbeddedBrokerAddr string   `envconfig:"EMBEDDED_BROKER_ADDR" default:"127.0.0.1:9092" desc:"host:port to listen on, e.g. 127.0.0.1:9092"`
	EmbeddedBrokerDir  string   `envconfig:"EMBEDDED_BROKER_DIR" default:"./data/broker" desc:"a directory path"`
	// EmbeddedBrokerPartitions is the partition count of the topics the
	// embedded broker creates for the processor.
	EmbeddedBrokerPartitions int32 `envconfig:"EMBEDDED_BROKER_PARTITIONS" default:"6" desc:"a partition count from 1 to 1000"`

	Group           string   `envconfig:"GROUP" desc:"the consumer group id, e.g. orders-enricher"`
	InputTopics     []string `envconfig:"INPUT_TOPICS" desc:"comma-separated topic names, e.g. orders,refunds"`
	OutputTopic     string   `envconfig:"OUTPUT_TOPIC" desc:"a topic name, e.g. orders-enriched"`
	TransactionalID string   `envconfig:"TRANSACTIONAL_ID" desc:"an id unique to this instance and stable across its restarts (default <group>-<hostname>)"`
	InstanceID      string   `envconfig:"INSTANCE_ID" desc:"a static group member id unique to this instance (KIP-345)"`
	Transforms      []string `envconfig:"TRANSFORMS" default:"identity" desc:"comma-separated transform names, name@alias to use one twice, e.g. jq,route"`

	CommitInterval   time.Duration `envconfig:"COMMIT_INTERVAL" default:"100ms" desc:"a Go duration such as 100ms or 1s, below PROCESSOR_TRANSACTION_TIMEOUT"`
	MaxRecordsPerTxn int           `envconfig:"MAX_RECORDS_PER_TXN" default:"10000" desc:"a whole number of records from 1 to 10000000"`
	// MaxTxnBytes bounds the output bytes one transaction holds in memory.
	MaxTxnBytes        bytesize.Size `envconfig:"MAX_TXN_BYTES" default:"64MiB" desc:"a size from 1MiB to 1GiB such as 64MiB (B, KiB, MiB, GiB; a plain number is bytes)"`
	SessionTimeout     time.Duration `envconfig:"SESSION_TIMEOUT" default:"45s" desc:"a Go duration from 6s to 30m, e.g. 45s"`
	TransactionTimeout time.Duration `envconfig:"TRANSACTION_TIMEOUT" default:"40s" desc:"a Go duration below PROCESSOR_SESSION_TIMEOUT and at most 15m, e.g. 40s"`

	OnError          string        `envconfig:"ON_ERROR" default:"fail" desc:"fail, dlq or skip"`
	DLQTopic         string        `envconfig:"DLQ_TOPIC" desc:"a topic name for dead letters, e.g. orders-dlq"`
	MaxRetries       int           `envconfig:"MAX_RETRIES" default:"3" desc:"a whole number of retries from 0 to 100"`
	TransformTimeout time.Duration `envconfig:"TRANSFORM_TIMEOUT" default:"0s" desc:"a Go duration such as 500ms; 0 sets no per-record deadline"`

	LineageHeaders bool `envconfig:"LINEAGE_HEADERS" default:"true" desc:"true or false"`
	// TestAbortRate is for fault drills only: the fraction of transactions
	// aborted on purpose (reason "injected") instead of committed.
	TestAbortRate float64 `envconfig:"TEST_ABORT_RATE" default:"0" desc:"a fraction from 0 to 1; for fault drills only"`

	HTTPAddr         string        `envconfig:"HTTP_ADDR" default:":8080" desc:"host:port to serve /metrics, /healthz and /readyz on, e.g. :8080"`
	LogLevel         string        `envconfig:"LOG_LEVEL" default:"info" desc:"one of debug, info, warn, error"`
	LogFormat        string        `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	ProgressInterval time.Duration `envconfig:"PROGRESS_INTERVAL" default:"5s" desc:"a Go duration such as 5s; 0 turns the progress line off"`
}

// Error is a configuration mistake: which variable, the value it had, and
// the form that was expected. Its message is one line meant for the user.
type Error struct {
	Var   string // full variable name, e.g. PROCESSOR_COMMIT_INTERVAL
	Value string // the offending value; empty when the variable is unset
	Unset bool   // the variable is required but not set
	Want  string // the expected form
}

func (e *Error) Error() string {
	if e.Unset {
		return fmt.Sprintf("%s is not set: want %s", e.Var, e.Want)
	}
	return fmt.Sprintf("%s=%q is invalid: want %s", e.Var, e.Value, e.Want)
}

// Load reads the PROCESSOR_* environment into a Config, applies defaults
// (the transactional ID defaults to <group>-<hostname>) and validates it.
// Every error it returns is an *Error.
func Load(hostname string) (*Config, error) {
	var c Config
	if err := Process(Prefix, &c); err != nil {
		return nil, err
	}
	if c.TransactionalID == "" && c.Group != "" {
		c.TransactionalID = c.Group + "-" + hostname
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Process fills spec, a pointer to a struct with envconfig tags, from the
// environment variables under prefix. Transforms' own settings are read
// with it (prefix PROCESSOR_<NAME> or PROCESSOR_<NAME>_<ALIAS>). A value
// that does not parse becomes an *Error quoting the field's `desc` tag.
//
// Only prefixed variables are read. envconfig.Process alone falls back to
// a field's bare tag when the prefixed variable is unset (LOG_LEVEL for
// PROCESSOR_LOG_LEVEL, TIMEOUT for PROCESSOR_JQ_SECOND_TIMEOUT), so each
// tagged field goes through envconfig in a one-field struct whose tag is
// the field's full variable name, leaving nothing to fall back to.
func Process(prefix string, spec any) error {
	v := reflect.ValueOf(spec)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("reading %s_* settings: %w", prefix, envconfig.ErrInvalidSpecification)
	}
	return processStruct(prefix, v.Elem())
}

// processStruct walks s's fields the way envconfig does: nested structs
// without their own decoding method hold more settings, under
// <prefix>_<TAG or FIELD> (under prefix itself when embedded).
func processStruct(prefix string, s reflect.Value) error {
	for i := 0; i < s.NumField(); i++ {
		f, sf := s.Field(i), s.Type().Field(i)
		if !f.CanSet() || isTrue(sf.Tag.Get("ignored")) {
			continue
		}
		inner := f
		for inner.Kind() == reflect.Pointer {
			if inner.IsNil() {
				if inner.Type().Elem().Kind() != reflect.Struct {
					break
				}
				inner.Set(reflect.New(inner.Type().Elem()))
			}
			inner = inner.Elem()
		}
		if inner.Kind() == reflect.Struct && !decodes(inner.Addr().Type()) {
			p := prefix
			if !sf.Anonymous {
				p = strings.ToUpper(joinPrefix(prefix, cmp.Or(sf.Tag.Get("envconfig"), sf.Name)))
			}
			if err := processStruct(p, inner); err != nil {
				return err
			}
			continue
		}
		if err := processField(prefix, sf, f); err != nil {
			return err
		}
	}
	return nil
}

// processField fills one field f, described by sf, with envconfig.
func processField(prefix string, sf reflect.StructField, f reflect.Value) error {
	p, tag := prefix, sf.Tag
	if name := sf.Tag.Get("envconfig"); name != "" {
		p = ""
		tag = reflect.StructTag(fmt.Sprintf(`envconfig:%q default:%q required:%q`,
			strings.ToUpper(joinPrefix(prefix, name)), sf.Tag.Get("default"), sf.Tag.Get("required")))
	}
	one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: sf.Name, Type: sf.Type, Tag: tag}}))
	one.Elem().Field(0).Set(f)
	if err := envconfig.Process(p, one.Interface()); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return &Error{Var: pe.KeyName, Value: pe.Value, Want: describe(sf.Tag.Get("desc"), pe.TypeName)}
		}
		return fmt.Errorf("reading %s_* settings: %w", prefix, err)
	}
	f.Set(one.Elem().Field(0))
	return nil
}

func joinPrefix(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "_" + name
}

// decodes reports whether envconfig parses a value of type pt's element
// with one of its methods rather than field by field.
func decodes(pt reflect.Type) bool {
	return pt.Implements(reflect.TypeFor[envconfig.Decoder]()) || pt.Implements(reflect.TypeFor[envconfig.Setter]()) ||
		pt.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) || pt.Implements(reflect.TypeFor[encoding.BinaryUnmarshaler]())
}

func isTrue(s string) bool {
	b, _ := strconv.ParseBool(s)
	return b
}

// want returns the desc tag of spec's field, or a description of its type.
func want(spec any, field, typ string) string {
	t := reflect.TypeOf(spec)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		if f, ok := t.FieldByName(field); ok {
			return describe(f.Tag.Get("desc"), typ)
		}
	}
	return describe("", typ)
}

// describe returns desc, or when it is empty a description of type typ.
func describe(desc, typ string) string {
	if desc != "" {
		return desc
	}
	switch typ {
	case "time.Duration":
		return "a Go duration such as 250ms or 6s"
	case "bool":
		return "true or false"
	}
	return "a value of type " + typ
}

// EnvName returns the full environment variable name of a Config field's
// tag, e.g. EnvName("GROUP") is "PROCESSOR_GROUP".
func EnvName(tag string) string { return Prefix + "_" + tag }

// Validate checks every setting and the relations between them. It
// returns the first problem as an *Error.
func (c *Config) Validate() error {
	bad := func(tag, value, want string) error {
		return &Error{Var: EnvName(tag), Value: value, Want: want}
	}
	unset := func(tag, want string) error {
		return &Error{Var: EnvName(tag), Unset: true, Want: want}
	}
	desc := func(field string) string { return want(c, field, "") }

	if c.EmbeddedBroker {
		if err := checkHostPort(c.EmbeddedBrokerAddr, true); err != nil {
			return bad("EMBEDDED_BROKER_ADDR", c.EmbeddedBrokerAddr, desc("EmbeddedBrokerAddr"))
		}
		if c.EmbeddedBrokerDir == "" {
			return unset("EMBEDDED_BROKER_DIR", desc("EmbeddedBrokerDir"))
		}
		if c.EmbeddedBrokerPartitions < 1 || c.EmbeddedBrokerPartitions > 1000 {
			return bad("EMBEDDED_BROKER_PARTITIONS", fmt.Sprint(c.EmbeddedBrokerPartitions), desc("EmbeddedBrokerPartitions"))
		}
	} else {
		if len(c.Brokers) == 0 {
			return unset("BROKERS", desc("Brokers")+", or PROCESSOR_EMBEDDED_BROKER=true to try the processor on one machine")
		}
		for _, b := range c.Brokers {
			if checkHostPort(b, false) != nil {
				return bad("BROKERS", strings.Join(c.Brokers, ","), desc("Brokers"))
			}
		}
	}

	if c.Group == "" {
		return unset("GROUP", desc("Group"))
	}
	if len(c.InputTopics) == 0 {
		return unset("INPUT_TOPICS", desc("InputTopics"))
	}
	for _, t := range c.InputTopics {
		if !topic.Valid(t) {
			return bad("INPUT_TOPICS", strings.Join(c.InputTopics, ","), desc("InputTopics")+" (topic names use only a-z A-Z 0-9 . _ -, at most 249 characters)")
		}
	}
	if c.OutputTopic == "" {
		return unset("OUTPUT_TOPIC", desc("OutputTopic"))
	}
	if !topic.Valid(c.OutputTopic) {
		return bad("OUTPUT_TOPIC", c.OutputTopic, desc("OutputTopic")+" (topic names use only a-z A-Z 0-9 . _ -, at most 249 characters)")
	}
	for _, t := range c.InputTopics {
		if t == c.OutputTopic {
			return bad("OUTPUT_TOPIC", c.OutputTopic, "a topic that is not also in PROCESSOR_INPUT_TOPICS (the processor would consume its own output forever)")
		}
	}
	if c.TransactionalID == "" {
		return unset("TRANSACTIONAL_ID", desc("TransactionalID"))
	}
	if len(c.Transforms) == 0 {
		return unset("TRANSFORMS", desc("Transforms"))
	}

	if c.CommitInterval <= 0 {
		return bad("COMMIT_INTERVAL", c.CommitInterval.String(), desc("CommitInterval"))
	}
	if c.MaxRecordsPerTxn < 1 || c.MaxRecordsPerTxn > 10_000_000 {
		return bad("MAX_RECORDS_PER_TXN", fmt.Sprint(c.MaxRecordsPerTxn), desc("MaxRecordsPerTxn"))
	}
	if c.MaxTxnBytes < 1<<20 || c.MaxTxnBytes > 1<<30 {
		return bad("MAX_TXN_BYTES", c.MaxTxnBytes.String(), desc("MaxTxnBytes"))
	}
	if c.SessionTimeout < 6*time.Second || c.SessionTimeout > 30*time.Minute {
		return bad("SESSION_TIMEOUT", c.SessionTimeout.String(), desc("SessionTimeout"))
	}
	if c.TransactionTimeout <= 0 || c.TransactionTimeout > 15*time.Minute {
		return bad("TRANSACTION_TIMEOUT", c.TransactionTimeout.String(), desc("TransactionTimeout"))
	}
	if c.TransactionTimeout >= c.SessionTimeout {
		return bad("TRANSACTION_TIMEOUT", c.TransactionTimeout.String(),
			fmt.Sprintf("a duration below PROCESSOR_SESSION_TIMEOUT (%s), so a stalled member's transaction is aborted before its partitions move", c.SessionTimeout))
	}
	if c.CommitInterval >= c.TransactionTimeout {
		return bad("COMMIT_INTERVAL", c.CommitInterval.String(),
			fmt.Sprintf("a duration well below PROCESSOR_TRANSACTION_TIMEOUT (%s)", c.TransactionTimeout))
	}

	if checkHostPort(c.HTTPAddr, true) != nil {
		return bad("HTTP_ADDR", c.HTTPAddr, desc("HTTPAddr"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("LOG_LEVEL", c.LogLevel, desc("LogLevel"))
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		return bad("LOG_FORMAT", c.LogFormat, desc("LogFormat"))
	}
	switch c.OnError {
	case "fail", "skip":
	case "dlq":
		if c.DLQTopic == "" {
			return unset("DLQ_TOPIC", desc("DLQTopic")+" (PROCESSOR_ON_ERROR=dlq needs one)")
		}
	default:
		return bad("ON_ERROR", c.OnError, desc("OnError"))
	}
	if c.DLQTopic != "" {
		if !topic.Valid(c.DLQTopic) {
			return bad("DLQ_TOPIC", c.DLQTopic, desc("DLQTopic")+" (topic names use only a-z A-Z 0-9 . _ -, at most 249 characters)")
		}
		for _, t := range c.InputTopics {
			if t == c.DLQTopic {
				return bad("DLQ_TOPIC", c.DLQTopic, "a topic that is not also in PROCESSOR_INPUT_TOPICS (to replay dead letters, run a separate processor with the DLQ topic as its input)")
			}
		}
	}
	if c.MaxRetries < 0 || c.MaxRetries > 100 {
		return bad("MAX_RETRIES", fmt.Sprint(c.MaxRetries), desc("MaxRetries"))
	}
	if c.TransformTimeout < 0 || (c.TransformTimeout > 0 && c.TransformTimeout >= c.TransactionTimeout) {
		return bad("TRANSFORM_TIMEOUT", c.TransformTimeout.String(), desc("TransformTimeout")+", below PROCESSOR_TRANSACTION_TIMEOUT")
	}
	if c.TestAbortRate < 0 || c.TestAbortRate > 1 {
		return bad("TEST_ABORT_RATE", fmt.Sprint(c.TestAbortRate), desc("TestAbortRate"))
	}
	if c.ProgressInterval < 0 {
		return bad("PROGRESS_INTERVAL", c.ProgressInterval.String(), desc("ProgressInterval"))
	}
	return nil
}

// TransformPrefix is the environment prefix of one transform's settings:
// PROCESSOR_<NAME> or, with an alias, PROCESSOR_<NAME>_<ALIAS>.
func TransformPrefix(name, alias string) string {
	p := Prefix + "_" + strings.ToUpper(name)
	if alias != "" {
		p += "_" + strings.ToUpper(alias)
	}
	return p
}

// checkHostPort accepts host:port; with emptyHost, ":port" too.
func checkHostPort(s string, emptyHost bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" && !emptyHost {
		return errors.New("missing host")
	}
	if port == "" {
		return errors.New("missing port")
	}
	for _, r := range port {
		if r < '0' || r > '9' {
			return errors.New("bad port")
		}
	}
	return nil
}

// Hostname returns the machine's host name for the default transactional
// ID, or "localhost" when it cannot be read.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

// Vars returns the names of the environment variables that Config reads,
// e.g. PROCESSOR_GROUP, so a caller can point out unknown ones (typos).
func Vars() []string {
	t := reflect.TypeFor[Config]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("envconfig"); tag != "" {
			names = append(names, EnvName(tag))
		}
	}
	return names
}
