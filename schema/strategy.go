package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// SubjectStrategy is how a subject is named for the keys or values of a
// topic, as Confluent's serdes name it (their subject.name.strategy).
type SubjectStrategy string

// The subject name strategies.
const (
	// TopicStrategy is TopicNameStrategy: <topic>-key or <topic>-value,
	// one subject (so one record type at a time) per topic and part.
	TopicStrategy SubjectStrategy = "topic"
	// RecordStrategy is RecordNameStrategy: the record name (RecordName),
	// one subject per record type whatever the topic.
	RecordStrategy SubjectStrategy = "record"
	// TopicRecordStrategy is TopicRecordNameStrategy: <topic>-<record
	// name>, one subject per topic and record type.
	TopicRecordStrategy SubjectStrategy = "topic_record"
)

// ParseSubjectStrategy reads a strategy's name as settings spell it; ""
// is TopicStrategy.
func ParseSubjectStrategy(s string) (SubjectStrategy, error) {
	switch st := SubjectStrategy(s); st {
	case "":
		return TopicStrategy, nil
	case TopicStrategy, RecordStrategy, TopicRecordStrategy:
		return st, nil
	}
	return "", fmt.Errorf("unknown subject name strategy %q: accepted values are topic, record, topic_record", s)
}

// ByRecord reports whether the strategy names subjects by record type,
// so that a topic may carry several.
func (s SubjectStrategy) ByRecord() bool { return s == RecordStrategy || s == TopicRecordStrategy }

// Subject returns the subject of the keys or values (suffix "-key" or
// "-value") of topic whose record name is record; record is not used by
// TopicStrategy.
func (s SubjectStrategy) Subject(topic, suffix, record string) string {
	switch s {
	case RecordStrategy:
		return record
	case TopicRecordStrategy:
		return topic + "-" + record
	}
	return topic + suffix
}

// RecordName returns the record name of s that the record strategies
// name a subject by, as Confluent's serializers derive it: for Avro the
// full name of a named type (namespace.name), the type's name for a
// primitive, an array or a map; for Protobuf the full name of message,
// or of the file's first message when message is empty; for JSON Schema
// the schema's "title". A schema without one (an Avro union, a JSON
// schema without a title) is FaultSchema.
func RecordName(ctx context.Context, reg Registry, s Schema, message string) (string, error) {
	switch s.Type {
	case Avro:
		if name := avroRecordName(s.Text); name != "" {
			return name, nil
		}
		return "", faultf(FaultSchema, "the Avro schema has no name (a union?): the record name strategies need a named type")
	case JSONSchema:
		if name := jsonSchemaTitle(s.Text); name != "" {
			return name, nil
		}
		return "", faultf(FaultSchema, "the JSON schema has no \"title\": the record name strategies name its subject by it")
	case Protobuf:
		c, err := compile(ctx, reg, s, message)
		if err != nil {
			return "", err
		}
		return string(c.(*protoCodec).message.FullName()), nil
	}
	return "", faultf(FaultSchema, "schema type %q is not a codec format (avro, protobuf, json_schema)", s.Type)
}

// avroRecordName is the record name of the Avro schema text, "" when it
// has none (a union, or text that is not JSON).
func avroRecordName(text string) string {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return ""
	}
	return avroName(v)
}

// avroName is avroRecordName of a parsed schema.
func avroName(v any) string {
	switch t := v.(type) {
	case string:
		return t // a primitive, or a named type by its name
	case map[string]any:
		typ, _ := t["type"].(string)
		switch typ {
		case "record", "error", "enum", "fixed":
			name, _ := t["name"].(string)
			ns, _ := t["namespace"].(string)
			if name == "" || strings.Contains(name, ".") || ns == "" {
				return name
			}
			return ns + "." + name
		case "":
			return avroName(t["type"]) // {"type": {...}}
		}
		return typ
	}
	return ""
}

// jsonSchemaTitle is the "title" of the JSON schema text, "" without one.
func jsonSchemaTitle(text string) string {
	var v struct {
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return ""
	}
	return v.Title
}
