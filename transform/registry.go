package transform

import (
	"fmt"
	"strings"

	"github.com/streamproc/processor/internal/registry"
	"github.com/streamproc/processor/settings"
)

// Spec describes one kind of transform: its documentation, its settings and
// how to build it. Settings are a struct whose fields declare themselves in
// tags (see Field); the processor fills a fresh one for each chain entry,
// from a variable of the entry's own per setting, and hands it to New, so
// a transform never reads the environment, nor knows the variables'
// names.
type Spec struct {
	// Doc is a one-line description shown in listings.
	Doc string
	// Settings returns a pointer to a new, zero settings struct, or nil for
	// a transform without settings.
	Settings func() any
	// New builds a transform from filled settings (nil when Settings is
	// nil). It validates them; a refused value is a *SettingError (see
	// Invalid and Missing).
	New func(settings any) (Transform, error)
}

// Fields returns the settings the spec declares, in struct order.
func (s Spec) Fields() []settings.Field {
	if s.Settings == nil {
		return nil
	}
	return fieldsOf(s.Settings())
}

// Typed builds a Spec from a constructor taking a pointer to its own
// settings type S, so plugin code never type-asserts.
func Typed[S any](doc string, build func(*S) (Transform, error)) Spec {
	return Spec{
		Doc:      doc,
		Settings: func() any { return new(S) },
		New:      func(s any) (Transform, error) { return build(s.(*S)) },
	}
}

// Plain builds a Spec for a transform without settings.
func Plain(doc string, build func() (Transform, error)) Spec {
	return Spec{Doc: doc, New: func(any) (Transform, error) { return build() }}
}

// Registry maps transform names to their specs. The zero value is empty and
// ready to use; tests build their own instead of touching Default.
type Registry struct {
	specs registry.Map[Spec]
}

// Default is the registry that built-in and compiled-in plugins register
// into from init().
var Default = &Registry{}

// Register adds a transform to Default. It panics if the name is taken or
// is not a plain identifier, or if the settings' tags cannot work, as
// database/sql.Register does: all are programming mistakes found at
// start-up.
func Register(name string, spec Spec) { Default.Register(name, spec) }

// Register adds a transform to r; see the package-level Register.
func (r *Registry) Register(name string, spec Spec) {
	if !identifier(name) {
		panic(fmt.Sprintf("transform: Register name %q is not a plain identifier", name))
	}
	if spec.New == nil {
		panic(fmt.Sprintf("transform: Register %q with a nil New", name))
	}
	spec.Fields() // panics on settings tags that cannot work
	r.specs.Add("transform", name, spec)
}

// Lookup returns the spec registered under name.
func (r *Registry) Lookup(name string) (Spec, bool) { return r.specs.Lookup(name) }

// Names returns the registered names, sorted.
func (r *Registry) Names() []string { return r.specs.Names() }

// UnknownError is returned for a chain entry naming no registered
// transform; its message lists the known ones.
type UnknownError struct {
	Name  string
	Known []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown transform %q (known: %s)", e.Name, strings.Join(e.Known, ", "))
}

func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
