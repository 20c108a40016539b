package settings

import (
	"errors"
	"fmt"
	"strings"
)

// Plugin names whose settings they are: the kind of plugin ("transform",
// "sink"), the name it is registered under and, for an entry that uses one
// plugin twice, its alias. The host binds each setting of a plugin to a
// variable of its own from these names; messages show the plugin as
// "transform jq" or "transform jq@second".
type Plugin struct {
	Kind  string // e.g. "transform"
	Name  string // the registered name, e.g. "jq"
	Alias string // empty unless the plugin is used under an alias
}

// Fill is Fill for the settings of p: an *Error it returns names p, so the
// host can name the variable.
func (p Plugin) Fill(fields []Field, settings any, lookup Lookup) error {
	err := Fill(fields, settings, lookup)
	var se *Error
	if errors.As(err, &se) {
		se.Plugin = p
	}
	return err
}

// String returns the plugin as messages show it: "transform jq@second".
func (p Plugin) String() string {
	s := p.Kind + " " + p.Name
	if p.Alias != "" {
		s += "@" + p.Alias
	}
	return s
}

// Part is one piece of a Text: literal text, or (Setting set) the name of
// another setting of the same plugin.
type Part struct {
	Lit     string // literal text
	Setting string // a setting's name, e.g. "HEADER"; Lit is then empty
}

// Text is a message that may name other settings of the same plugin, such
// as "unset while EXPR is set". The names are kept apart from the text so
// that the host shows each as the user sets it (its variable) without
// searching the message for them; Error shows them as they are declared.
type Text []Part

// Ref marks an argument of Say as the name of a setting of the same
// plugin.
type Ref string

// Say builds a Text from its arguments in order: each is literal text (a
// string) or a setting's name (a Ref). Any other argument is a programming
// mistake, and panics.
func Say(parts ...any) Text {
	var t Text
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			if p != "" {
				t = append(t, Part{Lit: p})
			}
		case Ref:
			t = append(t, Part{Setting: string(p)})
		default:
			panic(fmt.Sprintf("settings: Say takes strings and Refs, not %T", p))
		}
	}
	return t
}

// Format returns the text with each setting shown as name returns it.
func (t Text) Format(name func(setting string) string) string {
	var b strings.Builder
	for _, p := range t {
		if p.Setting != "" {
			b.WriteString(name(p.Setting))
		} else {
			b.WriteString(p.Lit)
		}
	}
	return b.String()
}

// String returns the text with each setting shown by its declared name.
func (t Text) String() string { return t.Format(declared) }

func declared(setting string) string { return setting }

// Error is a bad value of one setting: a value that does not parse, a
// required setting that is missing, or a value refused. It is the one
// error type of settings, every plugin's and the processor's own. Fill
// returns one for a value that does not parse or a missing required
// setting; a plugin returns one to refuse a value, and its host fills in
// Plugin, and Want from the field's form when the plugin leaves it empty.
// The host shows it as the user set it with Bind, naming its variables.
type Error struct {
	Plugin Plugin // whose setting; the zero Plugin when Fill alone is used
	Field  string // the setting, e.g. "EXPR"
	// Var is the variable the setting was read from, e.g.
	// PROCESSOR_JQ_EXPR, set by Bind (or by the host that builds the
	// error): the message then names it, in place of the plugin and the
	// setting.
	Var    string
	Value  string // the value given; empty when Unset or Secret
	Unset  bool   // the setting is required but was not given
	Secret bool   // the setting is a secret: the message does not show its value
	// Want is what was expected, usually the field's form; Detail follows
	// it, e.g. " (unexpected EOF)". Either may name other settings of the
	// same plugin.
	Want   Text
	Detail Text
}

// Error returns the message with settings named as they are declared,
// e.g. `transform jq: setting EXPR=".a |" is invalid: want a jq program`,
// or, once bound to a variable, as the user set it:
// `PROCESSOR_JQ_EXPR=".a |" is invalid: want a jq program`.
func (e *Error) Error() string {
	if e.Var != "" {
		return e.bound()
	}
	prefix := ""
	if e.Plugin != (Plugin{}) {
		prefix = e.Plugin.String() + ": "
	}
	switch {
	case e.Unset:
		return fmt.Sprintf("%ssetting %s is not set: want %s", prefix, e.Field, e.Expected(declared))
	case e.Secret:
		return fmt.Sprintf("%ssetting %s is invalid (its value is not shown): want %s", prefix, e.Field, e.Expected(declared))
	}
	return fmt.Sprintf("%ssetting %s=%q is invalid: want %s", prefix, e.Field, e.Value, e.Expected(declared))
}

// bound is the message of an error bound to its variable.
func (e *Error) bound() string {
	switch {
	case e.Unset:
		return fmt.Sprintf("%s is not set: want %s", e.Var, e.Expected(declared))
	case e.Secret:
		return fmt.Sprintf("%s is invalid (its value is not shown): want %s", e.Var, e.Expected(declared))
	}
	return fmt.Sprintf("%s=%q is invalid: want %s", e.Var, e.Value, e.Expected(declared))
}

// Bind returns a copy of e that names the variables the host reads
// settings from, as name returns them: Var is name(Field), and every
// setting that Want and Detail name is shown as its variable.
func (e *Error) Bind(name func(setting string) string) *Error {
	b := *e
	b.Var = name(e.Field)
	b.Want, b.Detail = Say(e.Expected(name)), nil
	return &b
}

// Expected returns what was expected, Want and then Detail, with each
// setting they name shown as name returns it (the host passes the function
// that names its variables).
func (e *Error) Expected(name func(setting string) string) string {
	return e.Want.Format(name) + e.Detail.Format(name)
}

// Message is an error whose text names settings of its plugin, such as
// "stopped after TIMEOUT=100ms": a plugin returns one, unwrapped, for a
// failure that a setting explains, and the host that runs the plugin sets
// Name, so that the message shows each setting as the user knows it (its
// variable). Err, when set, is what errors.Is and errors.As find in it.
type Message struct {
	Text Text
	Err  error
	Name func(setting string) string // set by the host; nil shows settings as declared
}

// Error returns the text, with settings named by Name.
func (m *Message) Error() string {
	if m.Name == nil {
		return m.Text.String()
	}
	return m.Text.Format(m.Name)
}

// Unwrap returns Err.
func (m *Message) Unwrap() error { return m.Err }
