package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
)

// keeper is a stateful stage of store, keeping state by the record key
// (byKey: transform.KeyScoped) or by a key of its own; declared
// partitioned by that key (transform.KeyPartitioned) when partitioned.
type keeper struct {
	store              string
	byKey, partitioned bool
}

func (keeper) Process(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	return append(out, r), nil
}
func (keeper) Ordered() bool            { return true }
func (k keeper) Stores() []string       { return []string{k.store} }
func (k keeper) KeyScoped() bool        { return k.byKey }
func (k keeper) PartitionedByKey() bool { return k.partitioned }
func (keeper) Touches() transform.Parts { return transform.PartValue }

// grouper is a keeper that names its group key (transform.GroupKeyer):
// one the processor repartitions by when it is not the record key.
type grouper struct{ keeper }

func (grouper) GroupKey(_ context.Context, r *kgo.Record) ([]byte, error) { return r.Value, nil }

// emitter is a grouper whose store emits when its entries close
// (transform.WindowEmitter), by EMIT=close.
type emitter struct{ grouper }

func (emitter) EmitsOnClose(string) bool { return true }
func (emitter) Closed(context.Context, transform.Closing, []*kgo.Record) ([]*kgo.Record, transform.Source, error) {
	return nil, transform.Source{}, nil
}

// ownCloser is an emitter that emits on close by a setting of its own
// (transform.CloseSetter), as a wasm stage does.
type ownCloser struct{ emitter }

func (ownCloser) CloseSetting() (name, value string) { return "EMIT_STORES", "w" }

// stateChain builds a chain of the stages named (with their aliases):
// k (keeper by record key), kb (keeper by a key of its own, no group
// key), g (grouper by a key of its own), gp (g declared partitioned by
// it), gk (grouper by record key), e (emitter), o (ownCloser), and
// rekey, a stateless stage that may change the key.
func stateChain(t *testing.T, names ...string) *transform.Chain {
	t.Helper()
	stages := map[string]func(store string) transform.Transform{
		"k":  func(s string) transform.Transform { return keeper{store: s, byKey: true} },
		"kb": func(s string) transform.Transform { return keeper{store: s} },
		"g":  func(s string) transform.Transform { return grouper{keeper{store: s}} },
		"gp": func(s string) transform.Transform { return grouper{keeper{store: s, partitioned: true}} },
		"gk": func(s string) transform.Transform { return grouper{keeper{store: s, byKey: true}} },
		"e":  func(s string) transform.Transform { return emitter{grouper{keeper{store: s}}} },
		"o":  func(s string) transform.Transform { return ownCloser{emitter{grouper{keeper{store: s}}}} },
		"op": func(s string) transform.Transform {
			return ownCloser{emitter{grouper{keeper{store: s, partitioned: true}}}}
		},
	}
	reg := &transform.Registry{}
	reg.Register("rekey", transform.Plain("", func() (transform.Transform, error) {
		return transform.Func(func(_ context.Context, _ transform.Source, r *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
			return append(out, r), nil
		}), nil
	}))
	var entries []transform.Entry
	for i, n := range names {
		if mk, ok := stages[n]; ok {
			store := n + string(rune('0'+i))
			reg.Register(store, transform.Plain("", func() (transform.Transform, error) { return mk(store), nil }))
			n = store
		}
		entries = append(entries, transform.Entry{Name: n})
	}
	c, err := reg.Build(entries, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stateOpts are options for a chain kept in Kafka on inputs.
func stateOpts(inputs ...string) Options {
	return Options{OutputTopic: "out", CommitInterval: time.Second, MaxRecordsPerTxn: 10, InputTopics: inputs,
		Changelogs: &Changelogs{}}
}

// New and Check refuse, with a *StateError of the rule, a chain with
// stores that the options cannot keep in Kafka: a replay, a hop or
// changelogs with a database sink, an at-least-once session, several
// inputs while a store is partitioned like the input, a stage emitting on
// close by its own setting behind the hop, a second hop, and a store that
// key ordering would not keep exact; and they take a chain without
// stores, or one the options can keep, whatever those options.
func TestCheckStateRules(t *testing.T) {
	sink := func(o *Options) { o.Changelogs.Sink = "postgres" }
	atLeastOnce := func(o *Options) { o.Changelogs.AtLeastOnce = true }
	keyOrder := func(o *Options) { o.Ordering = OrderKey }
	replay := func(o *Options) { o.Replay = true }
	for _, c := range []struct {
		name   string
		chain  []string
		inputs []string
		set    func(*Options)
		rule   StateRule
		entry  string // the StateError's Entry
	}{
		{"no stores, at least once", []string{"rekey"}, []string{"a", "b"}, func(o *Options) { atLeastOnce(o); sink(o); keyOrder(o); replay(o) }, 0, ""},
		{"kept", []string{"k"}, []string{"a"}, nil, 0, ""},
		{"replay", []string{"k"}, []string{"a"}, replay, StateReplay, ""},
		{"replay, nothing declared", []string{"k"}, []string{"a"}, func(o *Options) { replay(o); o.Changelogs = nil }, StateReplay, ""},
		{"a hop, a database sink", []string{"g"}, []string{"a"}, sink, StateHopSink, ""},
		{"at least once", []string{"k"}, []string{"a"}, atLeastOnce, StateAtLeastOnce, ""},
		{"a hop, at least once", []string{"g"}, []string{"a"}, atLeastOnce, StateAtLeastOnce, ""},
		{"a database sink", []string{"k"}, []string{"a"}, sink, StateSink, ""},
		{"two inputs", []string{"k"}, []string{"a", "b"}, nil, StateInputs, ""},
		{"two inputs, by a key of its own", []string{"kb"}, []string{"a", "b"}, nil, StateInputs, ""},
		{"two inputs, every store behind the hop", []string{"g"}, []string{"a", "b"}, nil, 0, ""},
		{"two inputs, a store before the hop", []string{"k", "g"}, []string{"a", "b"}, nil, StateInputs, ""},
		{"a store before the hop", []string{"k", "g"}, []string{"a"}, nil, 0, ""},
		{"emits on close behind the hop", []string{"e"}, []string{"a"}, nil, 0, ""},
		{"its own setting behind the hop", []string{"o"}, []string{"a"}, nil, StateHopClose, "o0"},
		{"its own setting after the hop stage", []string{"g", "o"}, []string{"a"}, nil, StateHopClose, "o1"},
		{"its own setting behind a key change", []string{"rekey", "k", "o"}, []string{"a"}, nil, StateHopClose, "o2"},
		{"its own setting, no hop", []string{"op"}, []string{"a"}, nil, 0, ""},
		{"by the record key behind a key change", []string{"rekey", "gk"}, []string{"a"}, sink, StateHopSink, ""},
		{"a second hop", []string{"g", "g"}, []string{"a"}, nil, StateSecondHop, "g1"},
		{"a second stage partitioned by its key", []string{"g", "gp"}, []string{"a"}, nil, 0, ""},
		{"key ordering by the key", []string{"k"}, []string{"a"}, keyOrder, 0, ""},
		{"key ordering, a key of its own", []string{"kb"}, []string{"a"}, keyOrder, StateKeyOrder, "kb0"},
		{"key ordering, declared partitioned by its own key", []string{"gp"}, []string{"a"}, keyOrder, StateKeyOrder, "gp0"},
		{"key ordering behind the hop", []string{"g"}, []string{"a"}, keyOrder, 0, ""},
		{"key ordering after a key change", []string{"rekey", "k"}, []string{"a"}, keyOrder, StateKeyOrder, "k1"},
		{"nothing declared", []string{"g", "g"}, []string{"a", "b"}, func(o *Options) { keyOrder(o); o.Changelogs = nil }, 0, ""},
	} {
		chain := stateChain(t, c.chain...)
		o := stateOpts(c.inputs...)
		if c.set != nil {
			c.set(&o)
		}
		checkErr := Check(chain, o)
		o.Metrics = NewMetrics(prometheus.NewRegistry())
		_, newErr := New(chain, o)
		for name, err := range map[string]error{"Check": checkErr, "New": newErr} {
			var se *StateError
			switch {
			case c.rule == 0 && err != nil:
				t.Errorf("%s: %s = %v, want no error", c.name, name, err)
			case c.rule != 0 && !errors.As(err, &se):
				t.Errorf("%s: %s = %v, want a *StateError of rule %d", c.name, name, err, c.rule)
			case c.rule != 0 && (se.Rule != c.rule || se.Entry.Name != c.entry || strings.Join(se.Stores, ",") != strings.Join(chain.Stores(), ",")):
				t.Errorf("%s: %s = %+v, want rule %d, entry %q, the chain's stores %v", c.name, name, se, c.rule, c.entry, chain.Stores())
			}
		}
	}
}

// Once the hop is open (Options.Repartition), its topic is one of the
// input topics and does not count as one: the stores before the hop
// still need exactly one other.
func TestCheckStateInputsBesideTheHop(t *testing.T) {
	for _, c := range []struct {
		chain   []string
		inputs  []string
		refused bool
	}{
		{[]string{"k", "g"}, []string{"a", "rep"}, false},
		{[]string{"k", "g"}, []string{"a", "b", "rep"}, true},
		{[]string{"g"}, []string{"a", "b", "rep"}, false},
	} {
		o := stateOpts(c.inputs...)
		o.Repartition = &Repartition{Topic: "rep"}
		err := Check(stateChain(t, c.chain...), o)
		var se *StateError
		if c.refused != (err != nil) || c.refused && (!errors.As(err, &se) || se.Rule != StateInputs) {
			t.Errorf("%v on %v: Check = %v, want refused %v (StateInputs)", c.chain, c.inputs, err, c.refused)
		}
	}
}
