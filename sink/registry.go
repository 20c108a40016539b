package sink

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/streamproc/processor/internal/registry"
	"github.com/streamproc/processor/settings"
)

// Spec describes one kind of destination: its documentation, its declared
// settings and how to open it. Settings are a struct whose fields declare
// themselves in tags (see package settings); the host fills a fresh one,
// binding each setting to a variable of its own (the processor binds it
// to one named after the sink and the setting), and hands it to Open, so a destination
// never reads the environment, nor knows the variables' names.
type Spec struct {
	// Doc is a one-line description shown in listings.
	Doc string
	// Title is how messages name the destination, e.g. "PostgreSQL"
	// ("connecting to PostgreSQL").
	Title string
	// Settings returns a pointer to a new, zero settings struct, or nil
	// for a destination without settings.
	Settings func() any
	// Open connects to the destination the filled settings describe (nil
	// when Settings is nil), and returns it with the function that closes
	// it. A setting that cannot work is a *settings.Error naming it; a
	// refusal that no retry fixes (a wrong password, a database that does
	// not exist) a *RefusedError; the host retries any other error, the
	// destination being down or unreachable.
	Open func(ctx context.Context, settings any, h Host) (Transactional, func(), error)
	// Names returns what the processor calls the destination's outputs
	// and dead letters where Kafka has topics (they label
	// processor_records_produced_total), e.g. "postgres:processor_records".
	Names func(settings any) (outputs, deadLetters string)
	// Metrics registers the destination's metric collectors with
	// register, as Open does with Host.Register, without opening it: the
	// processor's metrics reference (`processor metrics`, the table in
	// docs/operations.md) lists them from there. Nil for a destination
	// without metrics of its own.
	Metrics func(register func(collector any) error) error
}

// Host is what the processor gives a destination it opens.
type Host struct {
	// Group is the consumer group: offsets are stored per group.
	Group string
	// Logger gets the destination's messages.
	Logger *slog.Logger
	// Register registers one metric collector (a
	// prometheus.Collector) with the processor's registry; nil when the
	// host keeps no metrics.
	Register func(collector any) error
}

// RefusedError is a destination that refused the connection for a reason
// no retry fixes: Err says why, and what to check.
type RefusedError struct{ Err error }

// Error is Err's message.
func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RefusedError) Unwrap() error { return e.Err }

// Fields returns the settings the spec declares, in struct order.
func (s Spec) Fields() []settings.Field {
	if s.Settings == nil {
		return nil
	}
	return settings.Fields(s.Settings())
}

// Typed builds a Spec from functions that take a pointer to the
// destination's own settings type S, so its code never type-asserts.
func Typed[S any](doc string, open func(ctx context.Context, s *S, h Host) (Transactional, func(), error), names func(*S) (string, string)) Spec {
	return Spec{
		Doc:      doc,
		Settings: func() any { return new(S) },
		Open:     func(ctx context.Context, s any, h Host) (Transactional, func(), error) { return open(ctx, s.(*S), h) },
		Names:    func(s any) (string, string) { return names(s.(*S)) },
	}
}

// Registry maps destination names to their specs. The zero value is empty
// and ready to use; tests build their own instead of touching Default.
type Registry struct {
	specs registry.Map[Spec]
}

// Default is the registry that built-in destinations register into from
// init().
var Default = &Registry{}

// Register adds a destination to Default. It panics if the name is taken
// or is not a lower-case identifier, if Open or Names is nil, or if the
// settings' tags cannot work, as database/sql.Register does: all are
// programming mistakes found at start-up.
func Register(name string, spec Spec) { Default.Register(name, spec) }

// Register adds a destination to r; see the package-level Register.
func (r *Registry) Register(name string, spec Spec) {
	if !registry.LowerName(name) {
		panic(fmt.Sprintf("sink: Register name %q is not a lower-case identifier", name))
	}
	if spec.Open == nil || spec.Names == nil {
		panic(fmt.Sprintf("sink: Register %q without Open or Names", name))
	}
	spec.Fields() // panics on settings tags that cannot work
	r.specs.Add("sink", name, spec)
}

// Lookup returns the spec registered under name.
func (r *Registry) Lookup(name string) (Spec, bool) { return r.specs.Lookup(name) }

// Names returns the registered names, sorted.
func (r *Registry) Names() []string { return r.specs.Names() }
