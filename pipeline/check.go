package pipeline

import (
	"errors"
	"fmt"
	"slices"

	"github.com/streamproc/processor/transform"
)

// errRequired is New's error for options without what it cannot default.
var errRequired = errors.New("pipeline: OutputTopic, CommitInterval, MaxRecordsPerTxn and Metrics are required")

// DestinationError is returned by New and Check when a fixed destination
// of the chain (transform.Chain.Destinations, such as a route's default
// topic) is an input topic, which would feed the processor its own
// output, or the dead-letter topic, which would mix outputs into the
// dead letters. Records routed there at run time fail under the policy;
// a fixed destination would fail them all.
type DestinationError struct {
	Destination transform.Destination
	// DeadLetters says the destination is Options.DLQTopic; otherwise it
	// is one of Options.InputTopics.
	DeadLetters bool
}

func (e *DestinationError) Error() string {
	d := e.Destination
	if e.DeadLetters {
		return fmt.Sprintf("%s's %s is the dead-letter topic %q: outputs would be mixed into the dead letters", d.Entry, d.Setting, d.Topic)
	}
	return fmt.Sprintf("%s's %s is the input topic %q: the processor would consume its own output forever", d.Entry, d.Setting, d.Topic)
}

// Check returns the error New would return for chain and o, without
// building a pipeline; o's Metrics may be unset. A caller checks its
// settings with it before it has what New needs (metrics, the state's
// stores); New checks them again, with the same code.
func Check(chain *transform.Chain, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	return check(o, chain)
}

// check is what New and Check check of chain and o, o's defaults filled
// in: a chain with stores is not replayed (a *StateError), one record's
// retries fit the transaction's budget (CheckBudget), no fixed
// destination is an input or the dead-letter topic, and a chain with
// stores can be kept as Options.Changelogs declares (checkState).
func check(o Options, chain *transform.Chain) error {
	if o.Replay && len(chain.Stores()) > 0 {
		return checkState(o, chain)
	}
	if err := CheckBudget(o, chain); err != nil {
		return err
	}
	for _, d := range chain.Destinations() {
		switch {
		case slices.Contains(o.InputTopics, d.Topic):
			return &DestinationError{Destination: d}
		case o.DLQTopic != "" && d.Topic == o.DLQTopic:
			return &DestinationError{Destination: d, DeadLetters: true}
		}
	}
	return checkState(o, chain)
}
