package pipeline

import (
	"fmt"
	"strings"

	"github.com/streamproc/processor/transform"
)

// Changelogs declares, before the stores are open (Options.State), that
// the stores of a stateful chain (transform.Chain.Stores) are to be kept
// in Kafka: in changelog topics written in the session's transactions,
// each partitioned like the one input topic, or, behind a repartition hop
// (transform.Chain.Hop, Options.Repartition), like the hop's Kafka topic.
// With it, New and Check refuse a chain and options that cannot keep them
// so (a *StateError) before anything connects. Without it, a State kept
// otherwise (in memory by one process that sees every key, as
// pipelinetest's) is checked only as New needs.
type Changelogs struct {
	// AtLeastOnce says the session commits without transactions
	// (txn.AtLeastOnce): the stores would count replayed inputs twice.
	AtLeastOnce bool
	// Sink names the destination that commits the outputs and offsets
	// when it is not Kafka ("" for Kafka): its commit does not include
	// the Kafka transaction that writes the changelogs and the hop.
	Sink string
}

// StateRule is the rule of a StateError: what a chain with stores cannot
// be run with.
type StateRule int

// The rules, in the order New and Check apply them.
const (
	// StateReplay: the inputs are dead letters run again (Options.Replay),
	// which have no input partition a store could be kept by.
	StateReplay StateRule = iota + 1
	// StateHopSink: the chain needs a repartition hop, a Kafka topic
	// written in the transaction that commits the input, and
	// Changelogs.Sink commits elsewhere.
	StateHopSink
	// StateAtLeastOnce: Changelogs.AtLeastOnce; the stores need the
	// exactly-once session.
	StateAtLeastOnce
	// StateSink: the changelogs are written in the Kafka transaction,
	// which Changelogs.Sink's commit does not include.
	StateSink
	// StateInputs: more than one input topic (Options.InputTopics besides
	// the hop's) while some store is partitioned like the input, which
	// it can be only like one topic.
	StateInputs
	// StateHopClose: Entry emits on close by a setting of its own
	// (transform.CloseSetter) behind the hop made before Hop, which this
	// release cannot do.
	StateHopClose
	// StateSecondHop: Entry keeps state after Hop, the stage the hop is
	// made before, by yet another key: it would need a second hop.
	StateSecondHop
	// StateKeyOrder: under OrderKey, Entry's state could not be kept exact
	// (transform.Chain.KeyOrderConflict, Why says why).
	StateKeyOrder
)

// StateError is returned by New and Check for a chain with stores that
// the options, or Options.Changelogs, say cannot be kept: Rule says which
// rule refused it, the other fields what the rule names.
type StateError struct {
	Rule   StateRule
	Stores []string // the chain's stores, in stage order
	// Sink is Changelogs.Sink (StateHopSink, StateSink).
	Sink string
	// Entry is the entry at fault (StateHopClose, StateSecondHop,
	// StateKeyOrder), Hop the entry the repartition hop is made before
	// (StateHopClose, StateSecondHop).
	Entry, Hop transform.Entry
	// Setting and Value are Entry's own setting that makes it emit on
	// close (StateHopClose).
	Setting, Value string
	// Why says why Entry's state is not exact under key ordering
	// (StateKeyOrder).
	Why string
}

func (e *StateError) Error() string {
	what := "a chain with stores (" + strings.Join(e.Stores, ", ") + ")"
	switch e.Rule {
	case StateReplay:
		return what + " cannot replay dead letters: they have no input partition to keep the state by"
	case StateHopSink:
		return fmt.Sprintf("%s repartitions its records through a Kafka topic in the transaction that commits their input, which the commit of sink %q does not include", what, e.Sink)
	case StateAtLeastOnce:
		return what + " needs an exactly-once session: at least once, the state would count replayed inputs twice"
	case StateSink:
		return fmt.Sprintf("%s writes its changelogs in the Kafka transaction, which the commit of sink %q does not include", what, e.Sink)
	case StateInputs:
		return what + " needs exactly one input topic: partition p of each store is partition p of the input"
	case StateHopClose:
		return fmt.Sprintf("%s emits on close (%s=%s) after %s repartitions the records: emitting on close needs no hop", e.Entry, e.Setting, e.Value, e.Hop)
	case StateSecondHop:
		return fmt.Sprintf("%s keeps state after %s, which repartitions the records by its own group key: a second repartition hop", e.Entry, e.Hop)
	case StateKeyOrder:
		return fmt.Sprintf("key ordering runs records of different keys at once, and %s %s", e.Entry, e.Why)
	}
	return what + " cannot be kept"
}

// checkState applies the rules of a chain with stores (StateRule, in
// their order) to chain and o; nil for a chain without stores.
func checkState(o Options, chain *transform.Chain) error {
	stores := chain.Stores()
	if len(stores) == 0 {
		return nil
	}
	refuse := func(e *StateError) error {
		e.Stores = stores
		return e
	}
	if o.Replay {
		return refuse(&StateError{Rule: StateReplay})
	}
	kept := o.Changelogs
	if kept == nil {
		return nil
	}
	at, hopEntry, hop := chain.Hop()
	storesBefore := hop && len(chain.StoresBefore(at)) > 0
	switch {
	case hop && kept.Sink != "":
		return refuse(&StateError{Rule: StateHopSink, Sink: kept.Sink})
	case kept.AtLeastOnce:
		return refuse(&StateError{Rule: StateAtLeastOnce})
	case kept.Sink != "":
		return refuse(&StateError{Rule: StateSink, Sink: kept.Sink})
	case len(inputsBesidesHop(o)) != 1 && (!hop || storesBefore):
		return refuse(&StateError{Rule: StateInputs})
	}
	if hop {
		if em, ok := chain.EmitterFrom(at); ok {
			// A plugin's closed entry names its input by offset only:
			// behind the hop, a repartition record's, not the original
			// input's.
			if name, value, own := chain.CloseSettingFrom(at); own {
				return refuse(&StateError{Rule: StateHopClose, Entry: em, Hop: hopEntry, Setting: name, Value: value})
			}
		}
		if later, ok := chain.AfterHop(at); ok {
			return refuse(&StateError{Rule: StateSecondHop, Entry: later, Hop: hopEntry})
		}
	}
	if o.Ordering == OrderKey {
		if e, why, ok := chain.KeyOrderConflict(); !ok {
			return refuse(&StateError{Rule: StateKeyOrder, Entry: e, Why: why})
		}
	}
	return nil
}

// inputsBesidesHop are o's input topics but the repartition topic.
func inputsBesidesHop(o Options) []string {
	var inputs []string
	for _, t := range o.InputTopics {
		if o.Repartition == nil || t != o.Repartition.Topic {
			inputs = append(inputs, t)
		}
	}
	return inputs
}
