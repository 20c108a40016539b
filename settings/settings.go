// Package settings is the one model of a plugin's settings, transforms and
// sinks alike: a struct whose fields declare themselves in tags, filled
// through a Lookup that the host binds to its own variables.
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
// wrong); secret:"true" marks a password or the like, whose value no error
// shows; choices declares the only values a string setting takes,
// comma-separated (choices:"update,close"), so that Fill refuses any
// other. A plugin never sees where the values come from: the processor
// binds each setting to a variable of its own, and tests pass values
// directly.
//
// Field types: string, bool, int (any size), uint (any size), float64,
// time.Duration, []string (a comma-separated list), and any type
// implementing encoding.TextUnmarshaler. A string type with a method
// Choices() []string declares its choices itself (a list kept where the
// values are implemented, such as the formats a codec knows).
package settings

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Field is one declared setting.
type Field struct {
	Name     string // as in the setting tag, e.g. "EXPR"
	Type     string // "string", "bool", "int", "float", "duration" or the Go type's name
	Default  string // the value when the setting is not given; "" for none
	Required bool   // a missing setting is an error
	Doc      string // what the setting does, one line
	Form     string // the values it takes, quoted when a value is wrong
	Secret   bool   // a password or the like: errors never show its value
	// Choices are the only values a string setting takes, from its
	// choices tag or its type's Choices method; nil: any. The empty value
	// of a setting without a default that is not required means unset,
	// and is taken too.
	Choices []string

	index int // of the struct field
}

// Lookup returns a setting's value as given, and whether it was given at
// all; a nil Lookup gives nothing, so every setting takes its default.
type Lookup func(setting string) (string, bool)

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// chooser is a string type that declares its own choices.
type chooser interface{ Choices() []string }

// Fields returns the fields that settings, a pointer to a struct,
// declares. Tags that cannot work (a missing or malformed setting name, a
// type that cannot be parsed, a default that does not parse, a doc or form
// left out) panic: they are programming mistakes, found at registration.
func Fields(settings any) []Field {
	v := reflect.ValueOf(settings)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("settings: %T are not a pointer to a struct", settings))
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
			Doc: sf.Tag.Get("doc"), Form: sf.Tag.Get("form"), Secret: sf.Tag.Get("secret") == "true", index: i,
		}
		bad := func(why string) { panic(fmt.Sprintf("settings: %s.%s: %s", t, sf.Name, why)) }
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
		if why := declareChoices(&f, sf); why != "" {
			bad(why)
		}
		if f.Default != "" {
			if err := f.parse(reflect.New(sf.Type).Elem(), f.Default); err != nil {
				bad(fmt.Sprintf("default %q: %v", f.Default, err))
			}
		}
		fields = append(fields, f)
	}
	return fields
}

// declareChoices sets f's choices from sf's choices tag or its type's
// Choices method, or says why they cannot work.
func declareChoices(f *Field, sf reflect.StructField) string {
	tag := sf.Tag.Get("choices")
	c, typed := reflect.Zero(sf.Type).Interface().(chooser)
	switch {
	case tag != "" && typed:
		return "declares choices in a tag and in its type"
	case tag != "":
		f.Choices = strings.Split(tag, ",")
	case typed:
		f.Choices = c.Choices()
	default:
		return ""
	}
	if sf.Type.Kind() != reflect.String || f.Type != "string" {
		return "choices are for string settings"
	}
	for _, c := range f.Choices {
		if c == "" {
			return "declares an empty choice"
		}
	}
	return ""
}

// parse parses s into v, the struct field of f, and checks it against
// f's choices.
func (f Field) parse(v reflect.Value, s string) error {
	if err := parseInto(v, s); err != nil {
		return err
	}
	if f.Choices == nil || s == "" && f.Default == "" && !f.Required || slices.Contains(f.Choices, s) {
		return nil
	}
	return fmt.Errorf("not one of %s", strings.Join(f.Choices, ", "))
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
	case t == reflect.TypeFor[[]string]():
		return "list", true
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
	if v.Type() == reflect.TypeFor[[]string]() {
		v.Set(reflect.ValueOf(list(s)))
		return nil
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

// list splits a comma-separated list as envconfig does: no element for an
// empty or blank value, the elements as they are written otherwise.
func list(s string) []string {
	if strings.TrimSpace(s) == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// Fill sets every declared field of settings (a pointer to the struct
// fields came from) to its value from lookup, or to its default. A value
// that does not parse, or a required setting that is missing, is an
// *Error naming the field, with the field's form as Want.
func Fill(fields []Field, settings any, lookup Lookup) error {
	s := reflect.ValueOf(settings).Elem()
	for _, f := range fields {
		raw, given := "", false
		if lookup != nil {
			raw, given = lookup(f.Name)
		}
		if !given {
			if f.Default == "" {
				if f.Required {
					return &Error{Field: f.Name, Unset: true, Want: Say(f.Form)}
				}
				continue
			}
			raw = f.Default
		}
		if err := f.parse(s.Field(f.index), raw); err != nil {
			if f.Secret {
				return &Error{Field: f.Name, Secret: true, Want: Say(f.Form)}
			}
			return &Error{Field: f.Name, Value: raw, Want: Say(f.Form)}
		}
	}
	return nil
}
