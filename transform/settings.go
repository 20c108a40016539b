package transform

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
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
type Field struct {
	Name     string // as in the setting tag, e.g. "EXPR"
	Type     string // "string", "bool", "int", "float", "duration" or the Go type's name
	Default  string // the value when the setting is not given; "" for none
	Required bool   // a missing setting is an error
	Doc      string // what the setting does, one line
	Form     string // the values it takes, quoted when a value is wrong

	index int // of the struct field
}

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

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// fieldsOf returns the fields that settings, a pointer to a struct,
// declares. Tags that cannot work (a missing or malformed setting name, a
// type that cannot be parsed, a default that does not parse, a doc or form
// left out) panic: they are programming mistakes, found at registration.
func fieldsOf(settings any) []Field {
	v := reflect.ValueOf(settings)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("transform: settings %T are not a pointer to a struct", settings))
	}
	t := v.Elem().Type()
	var fields []Field
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		f := Field{
			Name: sf.Tag.Get("setting"), Default: sf.Tag.Get("default"), Required: sf.Tag.Get("required") == "true",
			Doc: sf.Tag.Get("doc"), Form: sf.Tag.Get("form"), index: i,
		}
		bad := func(why string) { panic(fmt.Sprintf("transform: settings %s.%s: %s", t, sf.Name, why)) }
		switch {
		case !settingName(f.Name):
			bad(`needs a tag setting:"NAME" of upper case letters, digits and _`)
		case seen[f.Name]:
			bad("setting " + f.Name + " is declared twice")
		case f.Doc == "" || f.Form == "":
			bad("needs doc and form tags")
		}
		seen[f.Name] = true
		typ, ok := typeName(sf.Type)
		if !ok {
			bad("type " + sf.Type.String() + " cannot be parsed from text")
		}
		f.Type = typ
		if f.Default != "" {
			if err := parseInto(reflect.New(sf.Type).Elem(), f.Default); err != nil {
				bad(fmt.Sprintf("default %q: %v", f.Default, err))
			}
		}
		fields = append(fields, f)
	}
	return fields
}

func settingName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// typeName names the kinds of values a field of type t takes, or reports
// that none can be parsed into it.
func typeName(t reflect.Type) (string, bool) {
	switch {
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		return t.Name(), true
	case t == reflect.TypeFor[time.Duration]():
		return "duration", true
	}
	switch t.Kind() {
	case reflect.String:
		return "string", true
	case reflect.Bool:
		return "bool", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int", true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "uint", true
	case reflect.Float32, reflect.Float64:
		return "float", true
	}
	return "", false
}

// parseInto parses s into v, a settable value of a type typeName accepts.
func parseInto(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(s))
	}
	if v.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(strings.TrimSpace(s), v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetFloat(n)
	default:
		return fmt.Errorf("cannot parse a %s", v.Type())
	}
	return nil
}

// fill sets every declared field of settings (a pointer to a struct) to
// its value from lookup, or to its default. A value that does not parse,
// or a required setting that is missing, is a *SettingError.
func fill(e Entry, fields []Field, settings any, lookup Lookup) error {
	s := reflect.ValueOf(settings).Elem()
	for _, f := range fields {
		raw, given := "", false
		if lookup != nil {
			raw, given = lookup(e, f.Name)
		}
		if !given {
			if f.Default == "" {
				if f.Required {
					return &SettingError{Entry: e, Field: f.Name, Unset: true, Want: f.Form}
				}
				continue
			}
			raw = f.Default
		}
		if err := parseInto(s.Field(f.index), raw); err != nil {
			return &SettingError{Entry: e, Field: f.Name, Value: raw, Want: f.Form}
		}
	}
	return nil
}
