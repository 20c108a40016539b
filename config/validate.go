package config

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamproc/processor/internal/registry"
	"github.com/streamproc/processor/internal/topic"
	"github.com/streamproc/processor/settings"
)

// Validate checks every setting and the relations between them, rule by
// rule in the order of rules. It returns the first problem as a
// *settings.Error naming the variable. (A value that is not one of a
// setting's declared choices Read has refused already.)
func (c *Config) Validate() error {
	for _, rs := range [][]rule{rules, oauthRules, schemaRules, clientRules} {
		for _, r := range rs {
			if (r.when == nil || r.when(c)) && !r.ok(c) {
				return r.failure(c)
			}
		}
	}
	return nil
}

// rule is one check of Validate: of a setting, or of a setting against
// others. Its error names the variable of field, quotes that field's value
// (unless unset) and gives the expected form.
type rule struct {
	// field is the Config field the rule is about: its setting tag names
	// the variable the error names, its form tag the expected form.
	field string
	// when limits the rule to the configurations it applies to; nil: all.
	when func(c *Config) bool
	// ok is the check; the rule fails when it returns false.
	ok func(c *Config) bool
	// unset makes a failure mean that the variable is required but not set.
	unset bool
	// form gives the expected form from the field's form tag; nil: form.
	form func(c *Config, desc string) string
}

// rules are Validate's checks in the order it makes them. A later rule may
// rely on the earlier ones having passed (e.g. on a positive transaction
// timeout).
var rules = []rule{
	// Where the brokers are: the embedded one's settings, or the seed list.
	{field: "EmbeddedBrokerAddr", when: embedded, ok: func(c *Config) bool { return checkHostPort(c.EmbeddedBrokerAddr, true) == nil }},
	{field: "EmbeddedBrokerDir", when: embedded, unset: true, ok: func(c *Config) bool { return c.EmbeddedBrokerDir != "" }},
	{field: "EmbeddedBrokerPartitions", when: embedded, ok: func(c *Config) bool { return within(c.EmbeddedBrokerPartitions, 1, 1000) }},
	{field: "Brokers", when: external, unset: true, ok: func(c *Config) bool { return len(c.Brokers) > 0 },
		form: note(", or PROCESSOR_EMBEDDED_BROKER=true to try the processor on one machine")},
	{field: "Brokers", when: external, ok: func(c *Config) bool { return all(c.Brokers, isBroker) }},

	// How the brokers are reached: TLS, and SASL with exactly one source
	// of the password. (cmd/processor/app reads the files at start.)
	{field: "TLSEnabled", when: embedded, ok: func(c *Config) bool { return !c.TLSEnabled },
		form: fixed("false with PROCESSOR_EMBEDDED_BROKER=true (the embedded broker speaks plaintext only; PROCESSOR_SASL_* work with it)")},
	{field: "TLSCAFile", when: tlsOff, ok: func(c *Config) bool { return c.TLSCAFile == "" }, form: needsTLS},
	{field: "TLSCertFile", when: tlsOff, ok: func(c *Config) bool { return c.TLSCertFile == "" }, form: needsTLS},
	{field: "TLSKeyFile", when: tlsOff, ok: func(c *Config) bool { return c.TLSKeyFile == "" }, form: needsTLS},
	{field: "TLSServerName", when: tlsOff, ok: func(c *Config) bool { return c.TLSServerName == "" }, form: needsTLS},
	{field: "TLSKeyFile", when: func(c *Config) bool { return c.TLSCertFile != "" }, unset: true,
		ok: func(c *Config) bool { return c.TLSKeyFile != "" }, form: note(" (PROCESSOR_TLS_CERT_FILE needs its key)")},
	{field: "TLSCertFile", when: func(c *Config) bool { return c.TLSKeyFile != "" }, unset: true,
		ok: func(c *Config) bool { return c.TLSCertFile != "" }, form: note(" (PROCESSOR_TLS_KEY_FILE is the key of a certificate)")},
	{field: "SASLUsername", when: passwordSASL, unset: true, ok: func(c *Config) bool { return c.SASLUsername != "" },
		form: note(" (PROCESSOR_SASL_MECHANISM needs one)")},
	{field: "SASLPassword", when: passwordSASL, unset: true, ok: func(c *Config) bool { return c.SASLPassword != "" || c.SASLPasswordFile != "" },
		form: note(", or PROCESSOR_SASL_PASSWORD_FILE (PROCESSOR_SASL_MECHANISM needs one of them)")},
	{field: "SASLPasswordFile", when: passwordSASL, ok: func(c *Config) bool { return c.SASLPassword == "" || c.SASLPasswordFile == "" },
		form: fixed("unset while PROCESSOR_SASL_PASSWORD is set: set one of them, not both")},
	{field: "SASLUsername", when: noSASL, ok: func(c *Config) bool { return c.SASLUsername == "" }, form: needsSASL},
	{field: "SASLPassword", when: noSASL, ok: func(c *Config) bool { return c.SASLPassword == "" }, form: needsSASL},
	{field: "SASLPasswordFile", when: noSASL, ok: func(c *Config) bool { return c.SASLPasswordFile == "" }, form: needsSASL},

	// What is consumed and produced, by whom.
	{field: "Group", unset: true, ok: func(c *Config) bool { return c.Group != "" }},
	{field: "InputTopics", unset: true, ok: func(c *Config) bool { return len(c.InputTopics) > 0 }},
	{field: "InputTopics", ok: func(c *Config) bool { return all(c.InputTopics, topic.Valid[string]) }, form: note(topicNote)},
	// Which sinks exist is the sink registry's to say (the wiring checks
	// it); here only that the name can be one.
	{field: "Sink", ok: func(c *Config) bool { return sinkName(c.Sink) }},
	{field: "OutputTopic", when: kafkaSink, unset: true, ok: func(c *Config) bool { return c.OutputTopic != "" }},
	{field: "OutputTopic", when: hasOutput, ok: func(c *Config) bool { return topic.Valid(c.OutputTopic) }, form: note(topicNote)},
	{field: "OutputTopic", when: hasOutput, ok: func(c *Config) bool { return !slices.Contains(c.InputTopics, c.OutputTopic) },
		form: fixed("a topic that is not also in PROCESSOR_INPUT_TOPICS (the processor would consume its own output forever)")},
	{field: "TransactionalID", unset: true, ok: func(c *Config) bool { return c.TransactionalID != "" }},
	{field: "Transforms", unset: true, ok: func(c *Config) bool { return len(c.Transforms) > 0 }},

	// Transactions: their bounds, and their timeout between the commit
	// interval and the session timeout.
	{field: "CommitInterval", ok: func(c *Config) bool { return c.CommitInterval > 0 }},
	{field: "RepartitionPurgeInterval", ok: func(c *Config) bool { return c.RepartitionPurgeInterval > 0 }},
	{field: "MaxRecordsPerTxn", ok: func(c *Config) bool { return within(c.MaxRecordsPerTxn, 1, 10_000_000) }},
	{field: "MaxTxnBytes", ok: func(c *Config) bool { return within(c.MaxTxnBytes, 1<<20, 1<<30) }},
	{field: "StateCacheBytes", ok: func(c *Config) bool { return within(c.StateCacheBytes, 8<<20, 64<<30) }},
	{field: "MaxOutputBytesPerRecord", ok: func(c *Config) bool { return within(c.MaxOutputBytesPerRecord, 1<<20, 1<<30) }},
	{field: "SessionTimeout", ok: func(c *Config) bool { return within(c.SessionTimeout, 6*time.Second, 30*time.Minute) }},
	// The brokers' transaction.max.timeout.ms (15m by default) is checked
	// at start, when they are reached (txn.TimeoutError).
	{field: "TransactionTimeout", ok: func(c *Config) bool { return c.TransactionTimeout > 0 }},
	{field: "TransactionTimeout", ok: func(c *Config) bool { return c.TransactionTimeout < c.SessionTimeout },
		form: func(c *Config, _ string) string {
			return fmt.Sprintf("a duration below PROCESSOR_SESSION_TIMEOUT (%s), so a stalled member's transaction is aborted before its partitions move", c.SessionTimeout)
		}},
	{field: "CommitInterval", ok: func(c *Config) bool { return c.CommitInterval < c.TransactionTimeout },
		form: func(c *Config, _ string) string {
			return fmt.Sprintf("a duration well below PROCESSOR_TRANSACTION_TIMEOUT (%s)", c.TransactionTimeout)
		}},

	// Serving and logging.
	{field: "HTTPAddr", ok: func(c *Config) bool { return checkHostPort(c.HTTPAddr, true) == nil }},
	{field: "StatusHistory", ok: func(c *Config) bool { return within(c.StatusHistory, time.Minute, 24*time.Hour) }},

	// Records that fail.
	{field: "DLQTopic", when: func(c *Config) bool { return c.OnError == "dlq" && kafkaSink(c) }, unset: true,
		ok: func(c *Config) bool { return c.DLQTopic != "" }, form: note(" (PROCESSOR_ON_ERROR=dlq needs one)")},
	{field: "DLQTopic", when: hasDLQ, ok: func(c *Config) bool { return topic.Valid(c.DLQTopic) }, form: note(topicNote)},
	{field: "DLQTopic", when: hasDLQ, ok: func(c *Config) bool { return !slices.Contains(c.InputTopics, c.DLQTopic) },
		form: fixed("a topic that is not also in PROCESSOR_INPUT_TOPICS (to replay dead letters, run a separate processor with the DLQ topic as its input)")},
	{field: "DLQTopic", when: func(c *Config) bool { return hasDLQ(c) && hasOutput(c) && kafkaSink(c) }, ok: func(c *Config) bool { return c.DLQTopic != c.OutputTopic },
		form: fixed("a topic other than PROCESSOR_OUTPUT_TOPIC (dead letters would be mixed into the outputs, and readers of either could not tell them apart)")},
	// A sink other than kafka stores the offsets with the rows (its own
	// settings are its package's, e.g. pgsink.Settings).
	{field: "Guarantee", when: otherSink, ok: func(c *Config) bool { return c.Guarantee == "exactly_once" },
		form: func(c *Config, _ string) string {
			return "exactly_once with " + EnvName("SINK") + "=" + c.Sink + " (rows and offsets commit in one database transaction)"
		}},
	{field: "MaxRetries", ok: func(c *Config) bool { return within(c.MaxRetries, 0, 100) }},
	{field: "LateTopic", when: func(c *Config) bool { return c.LateTopic != "" }, ok: func(c *Config) bool {
		return topic.Valid(c.LateTopic) && !slices.Contains(c.InputTopics, c.LateTopic) && c.LateTopic != c.OutputTopic && c.LateTopic != c.DLQTopic
	}, form: fixed("a valid topic name that is not an input, the output or the dead-letter topic")},
	{field: "MaxFutureSkew", ok: func(c *Config) bool { return c.MaxFutureSkew >= time.Second && c.MaxFutureSkew <= 8760*time.Hour }},
	{field: "MaxCrashAttempts", ok: func(c *Config) bool { return within(c.MaxCrashAttempts, 0, 1000) }},
	{field: "Workers", ok: func(c *Config) bool { return within(c.Workers, 0, 256) }},
	// The transaction timeout is positive by now, so 0 (no deadline) passes.
	{field: "TransformTimeout", ok: func(c *Config) bool { return c.TransformTimeout >= 0 && c.TransformTimeout < c.TransactionTimeout },
		form: note(", below PROCESSOR_TRANSACTION_TIMEOUT")},
	{field: "TestAbortRate", ok: func(c *Config) bool { return within(c.TestAbortRate, 0, 1) }},
	{field: "LineageHeaders", ok: func(c *Config) bool { _, _, ok := c.lineage(); return ok }},
	{field: "ProgressInterval", ok: func(c *Config) bool { return c.ProgressInterval >= 0 }},
}

// SASLMechanisms are the values PROCESSOR_SASL_MECHANISM takes, as it
// declares them.
var SASLMechanisms = choices("SASL_MECHANISM")

// choices returns the declared choices of setting.
func choices(setting string) []string {
	for _, f := range Fields() {
		if f.Name == setting {
			return f.Choices
		}
	}
	panic("config: no setting " + setting)
}

// needsTLS is the form of a TLS setting made while TLS is off.
func needsTLS(*Config, string) string {
	return "PROCESSOR_TLS_ENABLED=true along with it, or the variable unset (TLS is off, so it would do nothing)"
}

// needsSASL is the form of a SASL setting made without a mechanism.
func needsSASL(*Config, string) string {
	return "PROCESSOR_SASL_MECHANISM set along with it, or the variable unset (without a mechanism there is no SASL, so it would do nothing)"
}

// topicNote follows the form of a setting whose topic name topic.Valid
// refuses.
const topicNote = " (topic names use only a-z A-Z 0-9 . _ -, at most 249 characters)"

// failure is the *settings.Error that reports r failing on c.
func (r rule) failure(c *Config) *settings.Error {
	f, _ := reflect.TypeFor[Config]().FieldByName(r.field)
	name, want := f.Tag.Get("setting"), f.Tag.Get("form")
	if r.form != nil {
		want = r.form(c, want)
	}
	e := &settings.Error{Field: name, Var: EnvName(name), Unset: r.unset, Want: settings.Say(want)}
	switch {
	case f.Type == reflect.TypeFor[settings.Secret]():
		e.Secret = !r.unset // never quoted
	case !r.unset:
		e.Value = show(reflect.ValueOf(c).Elem().FieldByIndex(f.Index).Interface())
	}
	return e
}

// show writes a setting's value back the way it would be set: a list
// comma-separated, anything else as fmt prints it (durations and sizes by
// their String methods).
func show(v any) string {
	if list, ok := v.([]string); ok {
		return strings.Join(list, ",")
	}
	return fmt.Sprint(v)
}

// note returns a form: the desc tag followed by s.
func note(s string) func(*Config, string) string {
	return func(_ *Config, desc string) string { return desc + s }
}

// fixed returns a form: s in place of the desc tag.
func fixed(s string) func(*Config, string) string {
	return func(*Config, string) string { return s }
}

func embedded(c *Config) bool  { return c.EmbeddedBroker }
func external(c *Config) bool  { return !c.EmbeddedBroker }
func hasDLQ(c *Config) bool    { return c.DLQTopic != "" }
func kafkaSink(c *Config) bool { return c.Sink == "kafka" }
func otherSink(c *Config) bool { return c.Sink != "kafka" }

// sinkName reports whether s can name a sink: a lower-case identifier.
func sinkName(s string) bool   { return registry.LowerName(s) }
func hasOutput(c *Config) bool { return c.OutputTopic != "" }
func tlsOff(c *Config) bool    { return !c.TLSEnabled }
func hasSASL(c *Config) bool   { return c.SASLMechanism != "" }
func noSASL(c *Config) bool    { return c.SASLMechanism == "" }

// within reports whether v is not outside lo..hi. A NaN is not outside.
func within[T cmp.Ordered](v, lo, hi T) bool { return !(v < lo || v > hi) }

// all reports whether ok holds for every element of list.
func all(list []string, ok func(string) bool) bool {
	for _, s := range list {
		if !ok(s) {
			return false
		}
	}
	return true
}

// isBroker reports whether s is a seed broker's host:port.
func isBroker(s string) bool { return checkHostPort(s, false) == nil }

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

// Lineage says what PROCESSOR_LINEAGE_HEADERS asks for: whether outputs
// carry lineage at all, and whether in the legacy form of three headers
// rather than the compact processor.source. Validate has checked it.
func (c *Config) Lineage() (on, legacy bool) {
	on, legacy, _ = c.lineage()
	return on, legacy
}

// lineage reads LineageHeaders: compact, legacy or off, or a boolean as
// the setting was before it had a form (true is compact, false off).
func (c *Config) lineage() (on, legacy, ok bool) {
	switch c.LineageHeaders {
	case "compact":
		return true, false, true
	case "legacy":
		return true, true, true
	case "off":
		return false, false, true
	}
	b, err := strconv.ParseBool(c.LineageHeaders)
	return b, false, err == nil
}
