package transform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/settings"
)

// Entry is one element of the processor's chain: a registered name and an
// optional alias that lets one transform appear twice with its own settings.
type Entry struct {
	Name  string
	Alias string
}

// ParseEntry parses "name" or "name@alias". Both parts must be plain
// identifiers, since they become part of environment variable names.
func ParseEntry(s string) (Entry, error) {
	name, alias, hasAlias := strings.Cut(strings.TrimSpace(s), "@")
	if !identifier(name) {
		return Entry{}, fmt.Errorf("%q is not a transform name (letters, digits and _)", s)
	}
	if hasAlias && !identifier(alias) {
		return Entry{}, fmt.Errorf("%q has an alias that is not a plain name (letters, digits and _)", s)
	}
	return Entry{Name: name, Alias: alias}, nil
}

// String returns the entry as written in the chain: name or name@alias.
func (e Entry) String() string {
	if e.Alias == "" {
		return e.Name
	}
	return e.Name + "@" + e.Alias
}

// Chain runs transforms in order: every output of one stage is the input of
// the next. A Chain keeps scratch buffers and is for one goroutine.
type Chain struct {
	stages   []stage
	a, b     []*kgo.Record // ping-pong buffers between stages
	maxBytes int64         // MaxOutputBytes
	names    Names         // WithNames
	// at is the index of the stage running now (or last run), for Running;
	// only a chain of several stages sets it.
	at atomic.Int32
}

type stage struct {
	entry Entry
	name  string
	t     Transform
	host  bool // placed by Frame, not an entry
}

// Build constructs the chain for entries from r. Each entry's settings
// come from lookup (its defaults for what lookup does not give; nil gives
// nothing). A setting that does not parse, is missing, or that New refuses
// is a *SettingError naming the entry. Duplicate entries without distinct
// aliases are rejected: they would share one set of settings and read as a
// mistake. Options such as MaxOutputBytes apply to the whole chain.
func (r *Registry) Build(entries []Entry, lookup Lookup, opts ...BuildOption) (*Chain, error) {
	if len(entries) == 0 {
		return nil, errors.New("the transform chain is empty")
	}
	o := buildOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxOutputBytes <= 0 {
		o.maxOutputBytes = DefaultMaxOutputBytes
	}
	seen := make(map[Entry]bool, len(entries))
	c := &Chain{maxBytes: o.maxOutputBytes, names: o.names}
	fail := func(err error) (*Chain, error) {
		c.Close()
		return nil, err
	}
	for _, e := range entries {
		if seen[e] {
			return fail(fmt.Errorf("transform %s appears twice; give one an alias, e.g. %s@second", e, e.Name))
		}
		seen[e] = true
		spec, ok := r.Lookup(e.Name)
		if !ok {
			return fail(&UnknownError{Name: e.Name, Known: r.Names()})
		}
		var filled any
		var fields []settings.Field
		if spec.Settings != nil {
			filled, fields = spec.Settings(), spec.Fields()
			if err := fill(e, fields, filled, lookup); err != nil {
				return fail(err)
			}
		}
		t, err := spec.New(filled)
		if err != nil {
			var se *settings.Error
			if errors.As(err, &se) {
				return fail(refused(e, fields, se))
			}
			return fail(fmt.Errorf("transform %s: %w", e, err))
		}
		if l, ok := t.(OutputLimiter); ok {
			l.LimitOutputBytes(c.maxBytes)
		}
		c.stages = append(c.stages, stage{entry: e, name: e.String(), t: t})
		if err := c.checkStores(e, t); err != nil {
			return fail(err)
		}
		if err := c.checkEmitter(e, t); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// checkStores refuses a Stateful transform that is not Ordered, or whose
// stores another stage of the chain uses too.
func (c *Chain) checkStores(e Entry, t Transform) error {
	names := StoresOf(t)
	if len(names) == 0 {
		return nil
	}
	if !OrderedOf(t) {
		return fmt.Errorf("transform %s keeps state but is not ordered", e)
	}
	all := c.Stores()
	for _, n := range names {
		if n == "" {
			return fmt.Errorf("transform %s names an empty store", e)
		}
		count := 0
		for _, m := range all {
			if m == n {
				count++
			}
		}
		if count > 1 {
			return fmt.Errorf("transform %s: store %q is used by another stage; give each stage its own STORE", e, n)
		}
	}
	return nil
}

// Stage is a transform the host places in the chain itself, outside the
// registry and PROCESSOR_TRANSFORMS: the decoding of schema-encoded
// inputs before the entries and the encoding of outputs after them. Name
// is what its errors and dead letters name as the failed stage.
type Stage struct {
	Name string
	T    Transform
}

func (s Stage) stage() stage {
	return stage{entry: Entry{Name: s.Name}, name: s.Name, t: s.T, host: true}
}

// Frame places first before the chain's stages and last after them, once,
// before the chain runs. The stages count as the chain's (Len, Running,
// Close, Touches) but not as its Entries, and their errors are a stage's
// like any other.
func (c *Chain) Frame(first, last []Stage) {
	stages := make([]stage, 0, len(first)+len(c.stages)+len(last))
	for _, s := range first {
		stages = append(stages, s.stage())
	}
	stages = append(stages, c.stages...)
	for _, s := range last {
		stages = append(stages, s.stage())
	}
	c.stages = stages
}

// Touches returns the parts of a record that some stage of the chain
// touches (see Toucher): the key or value a schema codec must decode for
// the chain, and encode after it.
func (c *Chain) Touches() Parts {
	var p Parts
	for _, s := range c.stages {
		p |= TouchesOf(s.t)
	}
	return p
}

// Ordered reports whether some stage of the chain must see records in
// their input order (see Ordered).
func (c *Chain) Ordered() bool {
	for _, s := range c.stages {
		if OrderedOf(s.t) {
			return true
		}
	}
	return false
}

// PassThrough reports whether every stage of the chain passes its input
// through unchanged (see PassThrough), host stages included: the chain's
// output is its input record, alone, unless it is over MaxOutputBytes.
func (c *Chain) PassThrough() bool {
	for _, s := range c.stages {
		if !PassesThroughOf(s.t) {
			return false
		}
	}
	return len(c.stages) > 0
}

// Fits reports whether rec, as its own only output, is within the
// chain's MaxOutputBytes: whether Process of a PassThrough chain would
// return rec alone rather than an *OutputLimitError. The processor's loop
// produces such a record itself, without the call, and runs Process only
// for a record that does not fit, which Process then fails as usual.
func (c *Chain) Fits(rec *kgo.Record) bool { return Size(rec) <= c.maxBytes }

// InFlight returns the most records of one partition the chain may run
// at once by its stages' bounds (Concurrent): the smallest bound, which
// every stage's holds to, and the entry that declares it; 0 when no stage
// declares one.
func (c *Chain) InFlight() (int, Entry) {
	n, at := 0, Entry{}
	for _, s := range c.stages {
		if m := InFlightOf(s.t); m > 0 && (n == 0 || m < n) {
			n, at = m, s.entry
		}
	}
	return n, at
}

// Stores returns the stores of the chain's Stateful stages, in stage
// order; none for a chain without state.
func (c *Chain) Stores() []string {
	var names []string
	for _, s := range c.stages {
		names = append(names, StoresOf(s.t)...)
	}
	return names
}

// KeyOrderConflict returns the first entry whose state PROCESSOR_ORDERING=key
// could not keep exact, and why, or ok true when there is none: a
// Stateful stage that is not KeyScoped (its store keys may be shared by
// records of different keys, which key ordering runs at once), or one
// after an entry that may change the record's key (TouchesOf has PartKey),
// so that the key it groups by is not the key records were dealt by. The
// host's stages (Frame) decode and encode the key as it came, so they
// change nothing that matters here.
//
// The stage a repartition hop runs behind (Hop) is exact: the records it
// sees were dealt by their group key, which the hop made their key.
func (c *Chain) KeyOrderConflict() (e Entry, why string, ok bool) {
	var keyChanger *Entry
	hop, _, hasHop := c.Hop()
	for i := range c.stages {
		s := &c.stages[i]
		if len(StoresOf(s.t)) > 0 && (!hasHop || i != hop) {
			if ks, isKS := s.t.(KeyScoped); !isKS || !ks.KeyScoped() {
				return s.entry, "keeps state by something other than the record key (such as a BY expression), which records with different keys may share", false
			}
			if keyChanger != nil {
				return s.entry, "keeps state by the record key, which " + keyChanger.String() + " before it may change", false
			}
		}
		if !s.host && TouchesOf(s.t)&PartKey != 0 && keyChanger == nil {
			keyChanger = &s.entry
		}
	}
	return Entry{}, "", true
}

// Len returns the number of stages.
func (c *Chain) Len() int { return len(c.stages) }

// Entries returns the chain's entries in order, as they were given to
// Build.
func (c *Chain) Entries() []Entry {
	es := make([]Entry, 0, len(c.stages))
	for _, s := range c.stages {
		if !s.host {
			es = append(es, s.entry)
		}
	}
	return es
}

// CallTimeout returns the longest one run of the chain may take by the
// stages' own deadlines (the stages implementing Timed, added up), and the
// entry with the longest one, to name in errors; 0 when no stage bounds
// its calls.
func (c *Chain) CallTimeout() (time.Duration, Entry) {
	var total, longest time.Duration
	var at Entry
	for _, s := range c.stages {
		if t, ok := s.t.(Timed); ok {
			d := t.CallTimeout()
			total += d
			if d > longest {
				longest, at = d, s.entry
			}
		}
	}
	return total, at
}

// Running returns the entry running now in the goroutine that uses the
// chain, or the last one that ran: what a call that does not return is
// stuck in. It is safe from any goroutine; a one-stage chain answers that
// stage without the per-stage bookkeeping.
func (c *Chain) Running() Entry {
	if len(c.stages) == 0 {
		return Entry{}
	}
	return c.stages[min(int(c.at.Load()), len(c.stages)-1)].entry
}

// Destination is a fixed topic that a chain entry's setting names.
type Destination struct {
	Entry   Entry
	Setting string // the setting's field name, e.g. "DEFAULT"
	Topic   string
}

// Destinations returns the fixed topics the stages implementing
// Destinations write to, in chain order.
func (c *Chain) Destinations() []Destination {
	var ds []Destination
	for _, s := range c.stages {
		if d, ok := s.t.(Destinations); ok {
			m := d.Destinations()
			for _, k := range slices.Sorted(maps.Keys(m)) {
				ds = append(ds, Destination{Entry: s.entry, Setting: k, Topic: m[k]})
			}
		}
	}
	return ds
}

// Process runs rec through every stage and appends the final outputs to
// out. A failing or panicking stage fails the whole input record with an
// *Error naming the stage; out is then returned as it was given.
//
// The outputs of each stage for rec are measured as they come (Size, added
// up after every call of the stage): once they pass the chain's
// MaxOutputBytes the record fails with an *OutputLimitError, before the
// next stage multiplies them again.
func (c *Chain) Process(ctx context.Context, src Source, rec *kgo.Record, out []*kgo.Record) (res []*kgo.Record, err error) {
	n := len(out)
	var cur string
	defer func() {
		if v := recover(); v != nil {
			clear(c.a[:cap(c.a)]) // rare: not worth knowing which part is in use
			clear(c.b[:cap(c.b)])
			res = out[:n]
			err = &Error{Stage: cur, Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	if len(c.stages) == 1 {
		cur = c.stages[0].name
		// Not into out: a failing stage may return a nil or shorter slice,
		// and out[:n] must stay the caller's slice.
		if res, err = c.stages[0].t.Process(ctx, src, rec, out); err != nil {
			return out[:n], c.stageError(&c.stages[0], err)
		}
		if _, err = c.measure(res[n:], 0, len(res)-n); err != nil {
			return out[:n], c.stageError(&c.stages[0], err)
		}
		return res, nil
	}
	in := append(c.a[:0], rec)
	for i, s := range c.stages {
		cur = s.name
		c.at.Store(int32(i))
		last := i == len(c.stages)-1
		var next []*kgo.Record
		base := 0 // where this stage's outputs start in next
		if last {
			next, base = out, n
		} else {
			next = c.b[:0]
		}
		var total int64
		for _, r := range in {
			done := len(next)
			if next, err = s.t.Process(ctx, src, r, next); err == nil {
				total, err = c.measure(next[done:], total, len(next)-base)
			}
			if err != nil {
				// A failing stage may return nil for what it appended.
				clear(in)
				clear(c.a[:cap(c.a)])
				clear(c.b[:cap(c.b)])
				return out[:n], c.stageError(&c.stages[i], err)
			}
		}
		if last {
			out = next
		} else {
			// Keep both grown buffers for the next record.
			c.a, c.b = next, in
			in = next
		}
	}
	// Let go of the intermediate records: up to MaxOutputBytes of them
	// would otherwise stay alive until the next input.
	clear(c.a)
	clear(c.b)
	return out, nil
}

// stageError is the *Error of stage s failing with err, after naming the
// settings that err's message mentions as the chain's Names say.
func (c *Chain) stageError(s *stage, err error) error {
	var limit *OutputLimitError
	if errors.As(err, &limit) {
		limit.Setting = c.names.Limit
	}
	var msg *settings.Message
	if errors.As(err, &msg) && c.names.Setting != nil {
		p := s.entry.Plugin()
		msg.Name = func(setting string) string { return c.names.Setting(p, setting) }
	}
	return &Error{Stage: s.name, Err: err}
}

// measure adds the Size of a stage's new outputs to total, what its
// earlier outputs for the same input record held, and fails when the sum
// passes the chain's limit; records is the count of the stage's outputs so
// far, for the error.
func (c *Chain) measure(outs []*kgo.Record, total int64, records int) (int64, error) {
	for _, o := range outs {
		total += Size(o)
	}
	if total > c.maxBytes {
		return total, &OutputLimitError{Limit: c.maxBytes, Bytes: total, Records: records}
	}
	return total, nil
}

// Close closes every stage that implements io.Closer, in reverse order, and
// returns their errors joined.
func (c *Chain) Close() error {
	var errs []error
	for i := len(c.stages) - 1; i >= 0; i-- {
		if cl, ok := c.stages[i].t.(io.Closer); ok {
			if err := cl.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing transform %s: %w", c.stages[i].name, err))
			}
		}
	}
	return errors.Join(errs...)
}
