package config

import (
	"net/url"
	"slices"
	"time"

	"github.com/streamproc/processor/schema"
)

// The values of the PROCESSOR_*_FORMAT settings are the formats package
// schema knows (schema.Format declares them): raw bytes, or the Schema
// Registry wire format of each schema type. The values of
// PROCESSOR_KEY_SUBJECT_STRATEGY and PROCESSOR_VALUE_SUBJECT_STRATEGY are
// Confluent's subject name strategies: TopicNameStrategy,
// RecordNameStrategy, TopicRecordNameStrategy.

// OutputKeyFormatOrDefault is PROCESSOR_OUTPUT_KEY_FORMAT, or the input
// keys' format when it is unset.
func (c *Config) OutputKeyFormatOrDefault() schema.Format {
	if c.OutputKeyFormat == "" {
		return c.KeyFormat
	}
	return c.OutputKeyFormat
}

// OutputValueFormatOrDefault is PROCESSOR_OUTPUT_VALUE_FORMAT, or the
// input values' format when it is unset.
func (c *Config) OutputValueFormatOrDefault() schema.Format {
	if c.OutputValueFormat == "" {
		return c.ValueFormat
	}
	return c.OutputValueFormat
}

// UsesSchemaRegistry reports whether a key or value format, of the input
// or the output, is one the Schema Registry serves.
func (c *Config) UsesSchemaRegistry() bool {
	for _, f := range []schema.Format{c.KeyFormat, c.ValueFormat, c.OutputKeyFormatOrDefault(), c.OutputValueFormatOrDefault()} {
		if f != schema.Raw {
			return true
		}
	}
	return false
}

// DropSchemas sets every key and value format to raw and clears the
// Schema Registry settings: for `processor try`, whose sample records are
// already the JSON (or bytes) the chain sees.
func (c *Config) DropSchemas() {
	c.KeyFormat, c.ValueFormat, c.OutputKeyFormat, c.OutputValueFormat = "raw", "raw", "", ""
	c.OutputKeySubject, c.OutputValueSubject, c.OutputKeySchemaFile, c.OutputValueSchemaFile = "", "", "", ""
	c.OutputKeyMessage, c.OutputValueMessage = "", ""
	c.KeySubjectStrategy, c.ValueSubjectStrategy = "topic", "topic"
	c.SchemaRegistryURL, c.SchemaRegistryUsername, c.SchemaRegistryPassword, c.SchemaRegistryPasswordFile = nil, "", "", ""
	c.SchemaRegistryTLSCAFile, c.SchemaRegistryTLSCertFile, c.SchemaRegistryTLSKeyFile, c.SchemaRegistryTLSServerName = "", "", "", ""
	c.EmbeddedSchemaRegistry = false
}

// schemaRules are Validate's checks of the formats and the Schema
// Registry, made after rules.
var schemaRules = []rule{
	// Rows in a database are JSON: a sink other than kafka takes the
	// chain's JSON as it is.
	{field: "OutputValueFormat", when: otherSink, ok: func(c *Config) bool { return c.OutputValueFormatOrDefault() == "raw" },
		form: func(c *Config, _ string) string {
			return "raw with " + EnvName("SINK") + "=" + c.Sink + " (rows take the chain's JSON; set it to raw when the input is schema-encoded)"
		}},
	{field: "OutputKeyFormat", when: otherSink, ok: func(c *Config) bool { return c.OutputKeyFormatOrDefault() == "raw" },
		form: func(c *Config, _ string) string {
			return "raw with " + EnvName("SINK") + "=" + c.Sink + " (set it to raw when the input keys are schema-encoded)"
		}},
	{field: "OutputKeySubject", when: rawOutputKey, ok: func(c *Config) bool { return c.OutputKeySubject == "" }, form: needsOutputKeyFormat},
	{field: "OutputKeySchemaFile", when: rawOutputKey, ok: func(c *Config) bool { return c.OutputKeySchemaFile == "" }, form: needsOutputKeyFormat},
	{field: "OutputKeyMessage", when: func(c *Config) bool { return c.OutputKeyFormatOrDefault() != "protobuf" },
		ok: func(c *Config) bool { return c.OutputKeyMessage == "" }, form: fixed("unset unless the output keys are protobuf")},
	{field: "OutputValueSubject", when: rawOutputValue, ok: func(c *Config) bool { return c.OutputValueSubject == "" }, form: needsOutputValueFormat},
	{field: "OutputValueSchemaFile", when: rawOutputValue, ok: func(c *Config) bool { return c.OutputValueSchemaFile == "" }, form: needsOutputValueFormat},
	{field: "OutputValueMessage", when: func(c *Config) bool { return c.OutputValueFormatOrDefault() != "protobuf" },
		ok: func(c *Config) bool { return c.OutputValueMessage == "" }, form: fixed("unset unless the output values are protobuf")},
	{field: "KeySubjectStrategy", when: func(c *Config) bool { return byRecord(c.KeySubjectStrategy) && rawOutputKey(c) },
		ok: func(*Config) bool { return false }, form: strategyNeedsFormat("keys", "KEY")},
	{field: "ValueSubjectStrategy", when: func(c *Config) bool { return byRecord(c.ValueSubjectStrategy) && rawOutputValue(c) },
		ok: func(*Config) bool { return false }, form: strategyNeedsFormat("values", "VALUE")},
	{field: "OutputKeySubject", when: func(c *Config) bool { return byRecord(c.KeySubjectStrategy) },
		ok: func(c *Config) bool { return c.OutputKeySubject == "" }, form: subjectAgainstStrategy("KEY", c2k)},
	{field: "OutputValueSubject", when: func(c *Config) bool { return byRecord(c.ValueSubjectStrategy) },
		ok: func(c *Config) bool { return c.OutputValueSubject == "" }, form: subjectAgainstStrategy("VALUE", c2v)},
	{field: "KeySubjectStrategy", when: func(c *Config) bool { return byRecord(c.KeySubjectStrategy) && c.OutputKeySchemaFile == "" },
		ok: func(c *Config) bool { return c.KeyFormat == c.OutputKeyFormatOrDefault() }, form: strategyNeedsType("keys", "KEY")},
	{field: "ValueSubjectStrategy", when: func(c *Config) bool { return byRecord(c.ValueSubjectStrategy) && c.OutputValueSchemaFile == "" },
		ok: func(c *Config) bool { return c.ValueFormat == c.OutputValueFormatOrDefault() }, form: strategyNeedsType("values", "VALUE")},
	{field: "OutputKeyMessage", when: func(c *Config) bool { return byRecord(c.KeySubjectStrategy) && c.OutputKeySchemaFile == "" },
		ok: func(c *Config) bool { return c.OutputKeyMessage == "" }, form: messageAgainstStrategy("KEY", c2k)},
	{field: "OutputValueMessage", when: func(c *Config) bool { return byRecord(c.ValueSubjectStrategy) && c.OutputValueSchemaFile == "" },
		ok: func(c *Config) bool { return c.OutputValueMessage == "" }, form: messageAgainstStrategy("VALUE", c2v)},
	{field: "OutputSchemaRefreshInterval", ok: func(c *Config) bool {
		return within(c.OutputSchemaRefreshInterval, time.Second, 24*time.Hour)
	}},

	// Where the registry is: the embedded one, or URLs.
	{field: "EmbeddedSchemaRegistry", when: func(c *Config) bool { return c.EmbeddedSchemaRegistry },
		ok:   func(c *Config) bool { return len(c.SchemaRegistryURL) == 0 },
		form: fixed("false while PROCESSOR_SCHEMA_REGISTRY_URL is set: use the embedded registry or that one, not both")},
	{field: "EmbeddedSchemaRegistryAddr", when: func(c *Config) bool { return c.EmbeddedSchemaRegistry },
		ok: func(c *Config) bool { return checkHostPort(c.EmbeddedSchemaRegistryAddr, true) == nil }},
	{field: "EmbeddedSchemaRegistryDir", when: func(c *Config) bool { return c.EmbeddedSchemaRegistry }, unset: true,
		ok: func(c *Config) bool { return c.EmbeddedSchemaRegistryDir != "" }},
	{field: "SchemaRegistryURL", when: func(c *Config) bool { return c.UsesSchemaRegistry() && !c.EmbeddedSchemaRegistry }, unset: true,
		ok:   func(c *Config) bool { return len(c.SchemaRegistryURL) > 0 },
		form: note(" (a key or value format other than raw needs one; PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true to try one on this machine)")},
	{field: "SchemaRegistryURL", ok: func(c *Config) bool { return all(c.SchemaRegistryURL, isRegistryURL) }},
	{field: "SchemaRegistryURL", when: func(c *Config) bool { return len(c.SchemaRegistryURL) > 0 && !c.UsesSchemaRegistry() },
		ok:   func(c *Config) bool { return false },
		form: fixed("unset while every key and value format is raw, or PROCESSOR_VALUE_FORMAT (or another format) set to avro, protobuf or json_schema")},
	{field: "SchemaRegistryPassword", when: noRegistryUser, ok: func(c *Config) bool { return c.SchemaRegistryPassword == "" }, form: needsRegistryUser},
	{field: "SchemaRegistryPasswordFile", when: noRegistryUser, ok: func(c *Config) bool { return c.SchemaRegistryPasswordFile == "" }, form: needsRegistryUser},
	{field: "SchemaRegistryPassword", when: hasRegistryUser, unset: true,
		ok:   func(c *Config) bool { return c.SchemaRegistryPassword != "" || c.SchemaRegistryPasswordFile != "" },
		form: note(", or PROCESSOR_SCHEMA_REGISTRY_PASSWORD_FILE (PROCESSOR_SCHEMA_REGISTRY_USERNAME needs one of them)")},
	{field: "SchemaRegistryPasswordFile", when: hasRegistryUser,
		ok:   func(c *Config) bool { return c.SchemaRegistryPassword == "" || c.SchemaRegistryPasswordFile == "" },
		form: fixed("unset while PROCESSOR_SCHEMA_REGISTRY_PASSWORD is set: set one of them, not both")},
	{field: "SchemaRegistryTLSCAFile", when: registryPlain, ok: func(c *Config) bool { return c.SchemaRegistryTLSCAFile == "" }, form: needsHTTPS},
	{field: "SchemaRegistryTLSCertFile", when: registryPlain, ok: func(c *Config) bool { return c.SchemaRegistryTLSCertFile == "" }, form: needsHTTPS},
	{field: "SchemaRegistryTLSKeyFile", when: registryPlain, ok: func(c *Config) bool { return c.SchemaRegistryTLSKeyFile == "" }, form: needsHTTPS},
	{field: "SchemaRegistryTLSServerName", when: registryPlain, ok: func(c *Config) bool { return c.SchemaRegistryTLSServerName == "" }, form: needsHTTPS},
	{field: "SchemaRegistryTLSKeyFile", when: func(c *Config) bool { return c.SchemaRegistryTLSCertFile != "" }, unset: true,
		ok: func(c *Config) bool { return c.SchemaRegistryTLSKeyFile != "" }, form: note(" (PROCESSOR_SCHEMA_REGISTRY_TLS_CERT_FILE needs its key)")},
	{field: "SchemaRegistryTLSCertFile", when: func(c *Config) bool { return c.SchemaRegistryTLSKeyFile != "" }, unset: true,
		ok: func(c *Config) bool { return c.SchemaRegistryTLSCertFile != "" }, form: note(" (PROCESSOR_SCHEMA_REGISTRY_TLS_KEY_FILE is the key of a certificate)")},
}

// isRegistryURL reports whether s is an http or https URL with a host.
func isRegistryURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}

func rawOutputKey(c *Config) bool    { return c.OutputKeyFormatOrDefault() == "raw" }
func rawOutputValue(c *Config) bool  { return c.OutputValueFormatOrDefault() == "raw" }
func hasRegistryUser(c *Config) bool { return c.SchemaRegistryUsername != "" }
func noRegistryUser(c *Config) bool  { return c.SchemaRegistryUsername == "" }

// registryPlain: no registry URL is https, so registry TLS settings would
// do nothing.
func registryPlain(c *Config) bool {
	return !slices.ContainsFunc(c.SchemaRegistryURL, func(s string) bool { u, err := url.Parse(s); return err == nil && u.Scheme == "https" })
}

func needsOutputKeyFormat(*Config, string) string {
	return "unset while the output keys are raw (PROCESSOR_OUTPUT_KEY_FORMAT, by default PROCESSOR_KEY_FORMAT), or a schema format set there"
}

func needsOutputValueFormat(*Config, string) string {
	return "unset while the output values are raw (PROCESSOR_OUTPUT_VALUE_FORMAT, by default PROCESSOR_VALUE_FORMAT), or a schema format set there"
}

// byRecord reports whether strategy names subjects by record type.
func byRecord(strategy string) bool { return strategy == "record" || strategy == "topic_record" }

// c2k and c2v pick a side's strategy, for the forms below.
func c2k(c *Config) string { return c.KeySubjectStrategy }
func c2v(c *Config) string { return c.ValueSubjectStrategy }

func strategyNeedsFormat(part, tag string) func(*Config, string) string {
	return func(*Config, string) string {
		return "topic while the output " + part + " are raw (the strategy names the subjects of schema-encoded outputs; inputs are decoded by the schema id they carry whatever it is), or PROCESSOR_OUTPUT_" + tag + "_FORMAT set to a schema format"
	}
}

func strategyNeedsType(part, tag string) func(*Config, string) string {
	return func(c *Config, _ string) string {
		in, out := c.ValueFormat, c.OutputValueFormatOrDefault()
		if tag == "KEY" {
			in, out = c.KeyFormat, c.OutputKeyFormatOrDefault()
		}
		return "topic, or PROCESSOR_OUTPUT_" + tag + "_SCHEMA_FILE set, while the output " + part + " (" + string(out) + ") are not of the input's format (" + string(in) +
			"): without a schema file an output's record type is its input's, which only an input of the output's format has"
	}
}

func subjectAgainstStrategy(tag string, strategy func(*Config) string) func(*Config, string) string {
	return func(c *Config, _ string) string {
		return "unset while PROCESSOR_" + tag + "_SUBJECT_STRATEGY=" + strategy(c) + ", which names each output's subject by its record type (PROCESSOR_OUTPUT_" + tag + "_SCHEMA_FILE fixes the type), or that strategy topic"
	}
}

func messageAgainstStrategy(tag string, strategy func(*Config) string) func(*Config, string) string {
	return func(c *Config, _ string) string {
		return "unset while PROCESSOR_" + tag + "_SUBJECT_STRATEGY=" + strategy(c) + " without PROCESSOR_OUTPUT_" + tag + "_SCHEMA_FILE (each output is the message its input was), or a schema file set to pick the message of"
	}
}

func needsRegistryUser(*Config, string) string {
	return "PROCESSOR_SCHEMA_REGISTRY_USERNAME set along with it, or the variable unset"
}

func needsHTTPS(*Config, string) string {
	return "https URLs in PROCESSOR_SCHEMA_REGISTRY_URL along with it, or the variable unset (over http it would do nothing)"
}
