package transform

import "github.com/streamproc/processor/settings"

// A transform's settings are a struct whose fields declare themselves in
// tags (package settings), and the processor hands New a filled one:
//
//	type Settings struct {
//		Expr    string        `setting:"EXPR" required:"true" doc:"the jq program each value runs through" form:"a jq program such as .a"`
//		Timeout time.Duration `setting:"TIMEOUT" default:"100ms" doc:"how long one call may take" form:"a Go duration such as 100ms"`
//	}
//
// A transform never sees where the values come from: the host binds each
// setting of a chain entry to a variable of its own (named from the
// entry's name, its alias if it has one, and the setting), and tests pass
// values directly.

// A setting error of a transform is a *settings.Error, the one error type
// of every plugin's settings: New returns one to refuse a value (Invalid,
// Missing), and Build returns one for a value that does not parse or a
// required setting that is missing. Build fills in Plugin (the chain
// entry, kind "transform"), and Want from the field's form when New leaves
// it empty. Want and Detail may name other settings of the same transform
// (with settings.Ref); the processor shows each as its variable.

// Invalid returns the error refusing value for setting field: the field's
// form is wanted, followed by detail, the arguments of settings.Say (text,
// and settings.Ref for another setting of the same transform), e.g.
// Invalid("REMOVE", v, ", and none also in ", settings.Ref("SET")).
func Invalid(field, value string, detail ...any) *settings.Error {
	return &settings.Error{Field: field, Value: value, Detail: settings.Say(detail...)}
}

// Missing returns the error for a setting that must be given and was not:
// the field's form is wanted, followed by detail (as for Invalid).
func Missing(field string, detail ...any) *settings.Error {
	return &settings.Error{Field: field, Unset: true, Detail: settings.Say(detail...)}
}

// Lookup returns a setting's value as given, and whether it was given at
// all; a nil Lookup gives nothing, so every setting takes its default.
type Lookup func(e Entry, setting string) (string, bool)

// Plugin returns the entry as the owner of its settings: kind "transform",
// the entry's name and alias.
func (e Entry) Plugin() settings.Plugin {
	return settings.Plugin{Kind: "transform", Name: e.Name, Alias: e.Alias}
}

// fieldsOf returns the fields that settings, a pointer to a struct,
// declares; tags that cannot work panic (settings.Fields).
func fieldsOf(s any) []settings.Field { return settings.Fields(s) }

// fill sets every declared field of s to its value from lookup, or to
// its default. A value that does not parse, or a required setting that is
// missing, is a *settings.Error naming the entry.
func fill(e Entry, fields []settings.Field, s any, lookup Lookup) error {
	var l settings.Lookup
	if lookup != nil {
		l = func(name string) (string, bool) { return lookup(e, name) }
	}
	return e.Plugin().Fill(fields, s, l)
}

// refused completes a setting error that New returned for entry e: the
// entry, and the field's form as Want when New left it empty.
func refused(e Entry, fields []settings.Field, se *settings.Error) *settings.Error {
	se.Plugin = e.Plugin()
	if len(se.Want) == 0 {
		for _, f := range fields {
			if f.Name == se.Field {
				se.Want = settings.Say(f.Form)
			}
		}
	}
	return se
}
