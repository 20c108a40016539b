// Package schema decodes and encodes record keys and values in the
// Confluent Schema Registry wire format (a magic byte 0, a 4-byte
// big-endian schema id, for Protobuf the message-index list, then the
// payload) for Avro, Protobuf and JSON Schema, to and from the JSON that
// the chain sees. docs/schemas.md describes the mappings for users.
//
// Every failure is an *Error whose Fault says whose fault it is, so that
// the processor can route a bad record to the dead-letter topic, retry a
// registry that is down, or stop on bad credentials or a bad schema.
package schema

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// Format is how a key or value is encoded.
type Format string

// The formats a key or value can have.
const (
	Raw        Format = "raw" // bytes as they are
	Avro       Format = "avro"
	Protobuf   Format = "protobuf"
	JSONSchema Format = "json_schema"
)

// formats lists the accepted values of ParseFormat, in the order its
// error names them.
func formats() []Format { return []Format{Raw, Avro, Protobuf, JSONSchema} }

// Choices returns the names of the formats, in ParseFormat's order: the
// only values a setting of type Format takes (package settings reads them,
// so the processor's format settings accept what this package knows).
func (Format) Choices() []string {
	all := formats()
	names := make([]string, len(all))
	for i, f := range all {
		names[i] = string(f)
	}
	return names
}

// ParseFormat reads a format's name as settings spell it; the error lists
// the accepted values so that a typo is fixed at once.
func ParseFormat(s string) (Format, error) {
	all := formats()
	for _, f := range all {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown format %q: accepted values are %s", s, strings.Join(Raw.Choices(), ", "))
}

// RegistryType is the registry's schema type for f, for registering a
// schema; Raw (which has none) maps to Avro, the registry's default, and
// is never registered.
func (f Format) RegistryType() sr.SchemaType {
	switch f {
	case Protobuf:
		return sr.TypeProtobuf
	case JSONSchema:
		return sr.TypeJSON
	default:
		return sr.TypeAvro
	}
}

// formatOf maps the registry's schema type back to a Format.
func formatOf(t sr.SchemaType) Format {
	switch t {
	case sr.TypeProtobuf:
		return Protobuf
	case sr.TypeJSON:
		return JSONSchema
	default:
		return Avro
	}
}

// isCodec reports whether f is a format with a schema (not Raw).
func (f Format) isCodec() bool {
	return f == Avro || f == Protobuf || f == JSONSchema
}

// Fault says whose fault a failure is; the processor acts on it.
type Fault string

// The faults a failure can have.
const (
	// FaultRecord is the record's: no magic byte, an unknown schema id,
	// a payload that does not decode, JSON that does not fit the output
	// schema. The record goes to the dead-letter topic.
	FaultRecord Fault = "record"
	// FaultRegistry is the registry's: unreachable, timed out, 5xx, 429.
	// Not the record's fault: retry later.
	FaultRegistry Fault = "registry"
	// FaultCredentials is a 401 or 403 from the registry: the processor
	// stops (exit 1).
	FaultCredentials Fault = "credentials"
	// FaultSchema is a configured schema that is unusable: it does not
	// compile, its subject has no version, it is incompatible with the
	// subject, or its type is not the format's.
	FaultSchema Fault = "schema"
)

// Error is a failure with its Fault; its message says what is wrong and
// what to do.
type Error struct {
	Fault Fault
	Err   error
}

// Error returns the message of the wrapped error.
func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Fault) + " fault"
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error, for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// IDError is a record fault of a key or value whose header names schema
// id ID: the registry answered that it has no such id (never registered,
// or hard-deleted), its schema does not compile, or the payload does not
// decode with it. Its SchemaID method makes it a record.SchemaIDError, so
// the record's dead letter carries the id in processor.error.schema.id.
// It sits inside an *Error of FaultRecord.
type IDError struct {
	ID  int
	Err error
}

// Error returns the message of the wrapped error.
func (e *IDError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *IDError) Unwrap() error { return e.Err }

// SchemaID returns the id the record names.
func (e *IDError) SchemaID() int { return e.ID }

// withID marks a record fault of a record naming schema id id with the
// id (IDError); other faults come back as they are.
func withID(id int, err error) error {
	if FaultOf(err) != FaultRecord {
		return err
	}
	return &Error{Fault: FaultRecord, Err: &IDError{ID: id, Err: err}}
}

// FaultOf returns the Fault of the first *Error in err's chain, "" when
// there is none.
func FaultOf(err error) Fault {
	var e *Error
	if errors.As(err, &e) {
		return e.Fault
	}
	return ""
}

// faultf returns an *Error of fault f with a formatted message.
func faultf(f Fault, format string, args ...any) error {
	return &Error{Fault: f, Err: fmt.Errorf(format, args...)}
}

// withContext prefixes err's message while keeping its Fault (or giving
// it fault f when it has none).
func withContext(f Fault, err error, format string, args ...any) error {
	if got := FaultOf(err); got != "" {
		f = got
	}
	return &Error{Fault: f, Err: fmt.Errorf(format+": %w", append(args, err)...)}
}

// Schema is schema text as a registry stores it.
type Schema struct {
	Type       Format
	Text       string
	References []Reference
}

// Reference names another subject's version that a schema imports
// (Protobuf import path, Avro named type, JSON Schema $ref) by Name.
type Reference struct {
	Name, Subject string
	Version       int
}

// Subject is one registered version of a subject.
type Subject struct {
	Subject     string
	Version, ID int
	Schema      Schema
}
