package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// The format and Schema Registry settings: each mistake is one *Error
// naming the variable to change and the form it wants; good combinations
// load, with the output formats defaulting to the input's.
func TestSchemaSettings(t *testing.T) {
	reg := map[string]string{"VALUE_FORMAT": "avro", "SCHEMA_REGISTRY_URL": "http://registry:8081"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range reg {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	bad := []struct {
		name, wantVar, wantForm string
		set                     map[string]string
		unset                   bool
	}{
		{"unknown format", "VALUE_FORMAT", "raw, avro, protobuf or json_schema", map[string]string{"VALUE_FORMAT": "thrift"}, false},
		{"unknown key format", "KEY_FORMAT", "raw, avro", map[string]string{"KEY_FORMAT": "Avro"}, false},
		{"unknown output format", "OUTPUT_VALUE_FORMAT", "json_schema", with(map[string]string{"OUTPUT_VALUE_FORMAT": "csv"}), false},
		{"a format without a registry", "SCHEMA_REGISTRY_URL", "PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true", map[string]string{"VALUE_FORMAT": "protobuf"}, true},
		{"an output format without a registry", "SCHEMA_REGISTRY_URL", "needs one", map[string]string{"OUTPUT_VALUE_FORMAT": "avro"}, true},
		{"a registry without a format", "SCHEMA_REGISTRY_URL", "unset while every key and value format is raw", map[string]string{"SCHEMA_REGISTRY_URL": "http://r:8081"}, false},
		{"a registry URL without a scheme", "SCHEMA_REGISTRY_URL", "http or https URLs", with(map[string]string{"SCHEMA_REGISTRY_URL": "registry:8081"}), false},
		{"a second registry URL bad", "SCHEMA_REGISTRY_URL", "http or https URLs", with(map[string]string{"SCHEMA_REGISTRY_URL": "http://a:8081,ftp://b"}), false},
		{"a password without a user", "SCHEMA_REGISTRY_PASSWORD", "PROCESSOR_SCHEMA_REGISTRY_USERNAME", with(map[string]string{"SCHEMA_REGISTRY_PASSWORD": "s3cret"}), false},
		{"a user without a password", "SCHEMA_REGISTRY_PASSWORD", "PROCESSOR_SCHEMA_REGISTRY_PASSWORD_FILE", with(map[string]string{"SCHEMA_REGISTRY_USERNAME": "u"}), true},
		{"both password sources", "SCHEMA_REGISTRY_PASSWORD_FILE", "not both", with(map[string]string{"SCHEMA_REGISTRY_USERNAME": "u", "SCHEMA_REGISTRY_PASSWORD": "p", "SCHEMA_REGISTRY_PASSWORD_FILE": "/f"}), false},
		{"registry TLS over http", "SCHEMA_REGISTRY_TLS_CA_FILE", "https URLs", with(map[string]string{"SCHEMA_REGISTRY_TLS_CA_FILE": "/ca.pem"}), false},
		{"a registry certificate without its key", "SCHEMA_REGISTRY_TLS_KEY_FILE", "needs its key", with(map[string]string{"SCHEMA_REGISTRY_URL": "https://r:8081", "SCHEMA_REGISTRY_TLS_CERT_FILE": "/c.pem"}), true},
		{"a subject for raw outputs", "OUTPUT_VALUE_SUBJECT", "unset while the output values are raw", map[string]string{"OUTPUT_VALUE_SUBJECT": "x-value"}, false},
		{"a schema file for raw outputs", "OUTPUT_VALUE_SCHEMA_FILE", "unset while the output values are raw", with(map[string]string{"OUTPUT_VALUE_FORMAT": "raw", "OUTPUT_VALUE_SCHEMA_FILE": "/s.avsc"}), false},
		{"a message for avro", "OUTPUT_VALUE_MESSAGE", "unless the output values are protobuf", with(map[string]string{"OUTPUT_VALUE_MESSAGE": "shop.Order"}), false},
		{"a schema format into postgres", "OUTPUT_VALUE_FORMAT", "raw with PROCESSOR_SINK=postgres", with(map[string]string{"SINK": "postgres"}), false},
		{"embedded and external registry", "EMBEDDED_SCHEMA_REGISTRY", "not both", with(map[string]string{"EMBEDDED_SCHEMA_REGISTRY": "true"}), false},
		{"refresh too short", "OUTPUT_SCHEMA_REFRESH_INTERVAL", "from 1s to 24h", with(map[string]string{"OUTPUT_SCHEMA_REFRESH_INTERVAL": "10ms"}), false},
		{"an unknown strategy", "VALUE_SUBJECT_STRATEGY", "topic, record or topic_record", with(map[string]string{"VALUE_SUBJECT_STRATEGY": "RecordNameStrategy"}), false},
		{"an unknown key strategy", "KEY_SUBJECT_STRATEGY", "topic, record or topic_record", with(map[string]string{"KEY_SUBJECT_STRATEGY": "records"}), false},
		{"a record strategy for raw outputs", "VALUE_SUBJECT_STRATEGY", "topic while the output values are raw", with(map[string]string{"OUTPUT_VALUE_FORMAT": "raw", "VALUE_SUBJECT_STRATEGY": "record"}), false},
		{"a record strategy for raw keys", "KEY_SUBJECT_STRATEGY", "topic while the output keys are raw", with(map[string]string{"KEY_SUBJECT_STRATEGY": "topic_record"}), false},
		{"a subject with a record strategy", "OUTPUT_VALUE_SUBJECT", "unset while PROCESSOR_VALUE_SUBJECT_STRATEGY=record", with(map[string]string{"VALUE_SUBJECT_STRATEGY": "record", "OUTPUT_VALUE_SUBJECT": "x-value"}), false},
		{"a record strategy across formats", "VALUE_SUBJECT_STRATEGY", "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE set, while the output values (protobuf) are not of the input's format (avro)",
			with(map[string]string{"VALUE_SUBJECT_STRATEGY": "topic_record", "OUTPUT_VALUE_FORMAT": "protobuf"}), false},
		{"a message with a record strategy", "OUTPUT_VALUE_MESSAGE", "unset while PROCESSOR_VALUE_SUBJECT_STRATEGY=record without PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE",
			with(map[string]string{"VALUE_FORMAT": "protobuf", "VALUE_SUBJECT_STRATEGY": "record", "OUTPUT_VALUE_MESSAGE": "shop.Order"}), false},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.set)
			_, err := config.Load("h")
			var cerr *settings.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load() = %v, want a *settings.Error", err)
			}
			msg := err.Error()
			if cerr.Var != config.EnvName(tt.wantVar) || cerr.Unset != tt.unset || !strings.Contains(msg, tt.wantForm) || strings.Contains(msg, "\n") {
				t.Errorf("Load() = %q (unset %v), want one line naming %s (unset %v) with %q", msg, cerr.Unset, config.EnvName(tt.wantVar), tt.unset, tt.wantForm)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("the message shows the password: %q", msg)
			}
		})
	}

	good := []struct {
		name         string
		set          map[string]string
		key, value   string
		usesRegistry bool
	}{
		{"raw by default", nil, "raw", "raw", false},
		{"outputs default to the input's", with(nil), "raw", "avro", true},
		{"avro in, raw JSON out", with(map[string]string{"OUTPUT_VALUE_FORMAT": "raw"}), "raw", "raw", true},
		{"the embedded registry", map[string]string{"VALUE_FORMAT": "json_schema", "EMBEDDED_SCHEMA_REGISTRY": "true"}, "raw", "json_schema", true},
		{"protobuf keys and values with a message", with(map[string]string{"KEY_FORMAT": "protobuf", "VALUE_FORMAT": "protobuf", "OUTPUT_VALUE_MESSAGE": "shop.Order",
			"SCHEMA_REGISTRY_URL": "https://a:8081,https://b:8081", "SCHEMA_REGISTRY_USERNAME": "u", "SCHEMA_REGISTRY_PASSWORD_FILE": "/p",
			"SCHEMA_REGISTRY_TLS_CA_FILE": "/ca.pem", "OUTPUT_VALUE_SCHEMA_FILE": "/order.proto"}), "protobuf", "protobuf", true},
		{"a record strategy", with(map[string]string{"VALUE_SUBJECT_STRATEGY": "record"}), "raw", "avro", true},
		{"a topic record strategy with a schema file across formats", with(map[string]string{"VALUE_FORMAT": "raw", "OUTPUT_VALUE_FORMAT": "protobuf",
			"VALUE_SUBJECT_STRATEGY": "topic_record", "OUTPUT_VALUE_SCHEMA_FILE": "/order.proto", "OUTPUT_VALUE_MESSAGE": "shop.Order"}), "raw", "protobuf", true},
		{"record strategies for keys and values", with(map[string]string{"KEY_FORMAT": "avro", "KEY_SUBJECT_STRATEGY": "topic_record", "VALUE_SUBJECT_STRATEGY": "topic_record"}), "avro", "avro", true},
		{"postgres takes JSON from avro", with(map[string]string{"SINK": "postgres", "OUTPUT_VALUE_FORMAT": "raw"}), "raw", "raw", true},
	}
	for _, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.set)
			c, err := config.Load("h")
			if err != nil {
				t.Fatalf("Load() = %v", err)
			}
			if k, v := c.OutputKeyFormatOrDefault(), c.OutputValueFormatOrDefault(); string(k) != tt.key || string(v) != tt.value || c.UsesSchemaRegistry() != tt.usesRegistry {
				t.Errorf("output formats %s, %s, registry %v; want %s, %s, %v", k, v, c.UsesSchemaRegistry(), tt.key, tt.value, tt.usesRegistry)
			}
		})
	}
}
