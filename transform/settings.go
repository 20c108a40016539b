package transform

import (
	"errors"
	"fmt"

	"github.com/streamproc/processor/settings"
)

// A transform's settings are a struct whose fields declare themselves in
// tags, and the processor hands New a filled one:
//
//	type Settings struct {
//		Expr    string        `setting:"EXPR" required:"true" doc:"the jq program each value runs through" form:"a jq program such as .a"`
//		Timeout time.Duration `setting:"TIMEOUT" default:"100ms" doc:"how long one call may take" form:"a Go duration such as 100ms"`
//	}
//
// setting is the field's name (upper case letters, digits and _); default
// is the value when the setting is not given, as it would be written;
// required makes a missing setting an error; doc says in one line what the
// setting does, and form the values it takes (quoted when a value is
// wrong). A transform never sees where the values come from: the processor
// reads PROCESSOR_<NAME>_<SETTING> (PROCESSOR_<NAME>_<ALIAS>_<SETTING> for
// an aliased entry), and tests pass values directly.
//
// Field types: string, bool, int (any size), uint (any size), float64,
// time.Duration, and any type implementing encoding.TextUnmarshaler.

// Field is one declared setting of a transform.
type Field = settings.Field

// SettingError is a bad value of one setting: New returns one to refuse a
// value, and Build returns one for a value that does not parse or a
// required setting that is missing. Build fills in Entry, and Want from
// the field's form when New leaves it empty. The processor turns it into
// an error naming the environment variable.
type SettingError struct {
	Entry Entry  // the chain entry whose setting it is
	Field string // the setting, e.g. "EXPR"
	Value string // the value given; empty when Unset
	Unset bool   // the setting is required but was not given
	// Want is what was expected: when New leaves it empty, Build sets it
	// to the field's form. Detail follows it, e.g. " (unexpected EOF)".
	// Either may name another setting of the same transform by its
	// setting name (HEADER); the processor shows it as its variable.
	Want   string
	Detail string
}

func (e *SettingError) Error() string {
	if e.Unset {
		return fmt.Sprintf("transform %s: setting %s is not set: want %s%s", e.Entry, e.Field, e.Want, e.Detail)
	}
	return fmt.Sprintf("transform %s: setting %s=%q is invalid: want %s%s", e.Entry, e.Field, e.Value, e.Want, e.Detail)
}

// Invalid returns the error refusing value for setting field: the field's
// form is wanted, followed by detail (may be empty), e.g. " (" + err + ")".
func Invalid(field, value, detail string) *SettingError {
	return &SettingError{Field: field, Value: value, Detail: detail}
}

// Missing returns the error for a setting that must be given and was not:
// the field's form is wanted, followed by detail (may be empty).
func Missing(field, detail string) *SettingError {
	return &SettingError{Field: field, Unset: true, Detail: detail}
}

// Lookup returns a setting's value as given, and whether it was given at
// all; a nil Lookup gives nothing, so every setting takes its default.
type Lookup func(e Entry, setting string) (string, bool)

// fieldsOf returns the fields that settings, a pointer to a struct,
// declares; tags that cannot work panic (settings.Fields).
func fieldsOf(s any) []Field { return settings.Fields(s) }

// fill sets every declared field of s to its value from lookup, or to
// its default. A value that does not parse, or a required setting that is
// missing, is a *SettingError.
func fill(e Entry, fields []Field, s any, lookup Lookup) error {
	var l settings.Lookup
	if lookup != nil {
		l = func(name string) (string, bool) { return lookup(e, name) }
	}
	err := settings.Fill(fields, s, l)
	var se *settings.Error
	if errors.As(err, &se) {
		return &SettingError{Entry: e, Field: se.Field, Value: se.Value, Unset: se.Unset, Want: se.Want, Detail: se.Detail}
	}
	return err
}
