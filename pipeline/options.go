package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// Options configure a Pipeline.
type Options struct {
	OutputTopic      string        // where records with an empty Topic go
	CommitInterval   time.Duration // a transaction ends after this long ...
	MaxRecordsPerTxn int           // ... or after this many input records
	// TransactionTimeout is the session's transaction timeout (a minute
	// by default): what a transaction's budget (TxnBudget) and the end of
	// a transaction fit within, and how long one iteration of the loop
	// may take before it counts as stuck (Healthy fails).
	TransactionTimeout time.Duration
	ProgressInterval   time.Duration // 0: no progress line
	// Lineage stamps the lineage header on every output: processor.source
	// (topic/partition/offset), or with LegacyLineage the three
	// processor.source.topic, .partition and .offset headers. Dead letters
	// carry lineage whatever Lineage, in the form LegacyLineage says.
	Lineage       bool
	LegacyLineage bool

	// OnError decides what happens to a record that fails for good
	// (default Fail); DLQTopic receives dead letters under DeadLetter.
	OnError  OnError
	DLQTopic string
	// MaxRetries bounds the retries of a record whose transform failed
	// with a retriable error or timed out.
	MaxRetries int
	// TransformTimeout is the per-attempt deadline of the chain; 0 is none.
	// Whatever it is, a record that runs, all its attempts together, for
	// half of TxnBudget (or its worst case by these deadlines, if longer)
	// is cut and fails under OnError: it alone holds up the transaction.
	TransformTimeout time.Duration
	// TxnBudget is how long a transaction may process before it must end
	// (the watchdog aborts and shrinks the batch past it). Default: four
	// fifths of TransactionTimeout.
	TxnBudget time.Duration
	// SettingName names a setting in the messages that tell the user to
	// change it (logs, health, the error of a dead letter), the way the
	// user sets it: the processor passes its environment variables.
	// Default: the option's name, e.g. "Options.TransformTimeout".
	SettingName func(Setting) string
	Logger      *slog.Logger
	Metrics     *Metrics

	// InputTopics are the topics the session consumes. An output routed to
	// one of them, or to DLQTopic, fails its record: it would feed the
	// processor its own output.
	InputTopics []string
	// MaxTxnBytes bounds the output bytes (keys, values, headers) that one
	// transaction holds until it ends: the transaction ends at the first
	// poll boundary past it, and polls are sized from the bytes per input
	// record seen so far, so a transaction overshoots it only when its
	// records suddenly grow. 0 is no bound.
	MaxTxnBytes int64

	// EndOffsetsInterval is how often the assigned partitions' end offsets
	// are read for the lag gauges while no record arrives. Default 5s.
	EndOffsetsInterval time.Duration

	// RequireTopics must exist before the loop starts (the output and
	// dead-letter topics): producing to a missing topic would abort every
	// transaction forever. Run returns a *MissingTopicsError otherwise.
	RequireTopics []string

	// Chains are the chains of the workers beyond the first (which runs
	// the chain passed to New): with any, a poll's records run through the
	// chain concurrently, in runs of one partition's records shared among
	// the workers, while every partition's outputs are produced in its
	// input order, in the open transaction, under the same policies. A
	// transform then no longer sees one partition's records one after
	// another, unless the chain is ordered (transform.Ordered, Ordering).
	// Each chain must be built like the first and serve no one
	// else; the caller keeps them and closes them after Run has returned.
	// A chain whose stages wait on a service (transform.Concurrent) asks
	// for InFlight records of a partition at once: under OrderKey each
	// partition's records are dealt to InFlight of the workers only, so
	// give it at least InFlight chains in all.
	Chains []*transform.Chain
	// State holds the stores of a chain with stateful transforms
	// (Chain.Stores), nil for a chain without: the loop begins its
	// transaction with each Kafka transaction, produces its changelog
	// records into it, commits or aborts it with it, and restores the
	// assigned partitions between transactions before any of their
	// records runs. It needs an ordered chain and one input topic, whose
	// partitions are the stores'.
	State State
	// Tables are the tables the chain's join stages read (Table):
	// restored with the stores, on assignment, before any record of the
	// input partitions assigned runs.
	Tables []Table
	// Changelogs declares, before State is open, that the stores are to
	// be kept in Kafka, as the processor keeps them: New and Check then
	// refuse what cannot be kept so (see Changelogs). Nil declares
	// nothing.
	Changelogs *Changelogs
	// Repartition, when set, is the hop of a chain whose stateful stage
	// keeps its state by something other than the input's partitioning
	// key (transform.Chain.Hop); its topic is one of InputTopics, and the
	// stores from the hop stage on are partitioned like it.
	Repartition *Repartition
	// Ordering is how the workers share a partition's records when the
	// chain is ordered (transform.Ordered): OrderPartition (the default)
	// or OrderKey. A chain that is not ordered shares them in runs
	// whatever it says.
	Ordering Ordering
	// MaxFutureSkew is how far ahead of the wall clock a record's
	// timestamp may move its partition's stream time (see
	// streamtime.go): a record stamped later moves it to the wall clock
	// plus MaxFutureSkew only, and is counted. Default
	// DefaultMaxFutureSkew.
	MaxFutureSkew time.Duration
	// LateTopic receives the records stateful stages find late
	// (transform.Late), written inside the transaction with the
	// processor.late.* headers; "" drops them (windows) or passes them
	// (dedupe), counted either way.
	LateTopic string

	// FailingAfter is how long transactions may keep aborting with no
	// commit (at least minFailingAborts of them) before Healthy fails.
	// Default: twice TransactionTimeout, at least a minute.
	FailingAfter time.Duration

	// Replay says that the input topics hold dead letters run again
	// (`processor replay`): each record's lineage header names the input
	// it was a dead letter of, and that input, not the dead letter, is
	// what the chain sees as its source, what outputs' lineage names and
	// what the dead letter of a record that fails again names; such a
	// dead letter counts the replays in processor.error.replays. The
	// chain's first stage restores the record itself (the replay
	// package's Restore).
	Replay bool

	// InjectAbort is for tests and fault drills only: it is called before
	// each commit with the transaction's sequence number (from 1), and
	// returning true aborts that transaction with reason "injected".
	InjectAbort func(seq uint64) bool
	// InjectCrash is for tests and fault drills only: it is called with
	// every input record before the chain runs it, and may end the
	// process (a record that kills it, see crash.go).
	InjectCrash func(r *kgo.Record)
}

// Ordering is how the workers share the records of an ordered chain
// (transform.Ordered).
type Ordering string

// The orderings.
const (
	// OrderPartition runs all of a partition's records of a poll on one
	// worker, in offset order; partitions run in parallel.
	OrderPartition Ordering = "partition"
	// OrderKey spreads a partition's records over the workers by a hash of
	// their key: each key's records run on one worker in offset order,
	// null-key records on the worker their partition would have.
	OrderKey Ordering = "key"
)

// Setting is an option that a message of the pipeline tells its user to
// change. Options.SettingName says how the user sets it, so that the
// message names it the way the user knows it.
type Setting string

// The settings that messages name.
const (
	SettingOnError          Setting = "OnError"          // Options.OnError
	SettingTransformTimeout Setting = "TransformTimeout" // Options.TransformTimeout
	// SettingTransactionTimeout is the transaction timeout
	// (Options.TransactionTimeout).
	SettingTransactionTimeout Setting = "TransactionTimeout"
	// SettingMaxCrashAttempts is the session's count of crash attempts
	// (txn.Options.MaxCrashAttempts), which a record's dead letter names
	// when the process died on it.
	SettingMaxCrashAttempts Setting = "MaxCrashAttempts"
)

// settingNames are the names of the settings that messages name.
type settingNames struct {
	onError, transformTimeout, transactionTimeout, maxCrashAttempts string
}

// newSettingNames names the settings with name, or by their option.
func newSettingNames(name func(Setting) string) settingNames {
	if name == nil {
		name = func(s Setting) string { return "Options." + string(s) }
	}
	return settingNames{
		onError:            name(SettingOnError),
		transformTimeout:   name(SettingTransformTimeout),
		transactionTimeout: name(SettingTransactionTimeout),
		maxCrashAttempts:   name(SettingMaxCrashAttempts),
	}
}

// New returns a pipeline that runs chain with o; Run runs it on a
// session. New needs no broker: it refuses what Check refuses (o's
// required fields and values, one record's retries past the budget, a
// fixed destination that is an input or the dead-letter topic, a chain
// with stores that o cannot keep: a *StateError), and stores
// (Options.State) or a hop (Options.Repartition) that chain and o's input
// topics cannot work with, so that a processor refuses what cannot work
// before it connects anything.
func New(chain *transform.Chain, o Options) (*Pipeline, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Metrics == nil {
		return nil, errRequired
	}
	if err := check(o, chain); err != nil {
		return nil, err
	}
	p := &Pipeline{
		chain: chain, o: o, log: o.Logger,
		names:   newSettingNames(o.SettingName),
		pool:    newPool(chain, o.Chains, o.Ordering),
		open:    newOpenTxn(o.Lineage, o.LegacyLineage),
		pace:    pace{max: o.MaxRecordsPerTxn},
		book:    poisonBook{poison: make(map[record.Source]poison), missing: make(map[string]time.Time)},
		mon:     newMonitor(recordLimit(o, chain), len(o.Chains)+1),
		work:    context.Background(),
		parts:   newPartitions(o.Metrics),
		latency: newLatencyWindow(o.Metrics.EndToEndLatency),
		// Each with a random source of its own.
		retryWait: backoff.New(retryPolicy()),
	}
	p.health.abortWait, p.health.outageWait = backoff.New(abortPolicy()), backoff.New(outagePolicy())
	if o.State != nil {
		groups, err := stateGroups(o, chain)
		if err != nil {
			return nil, err
		}
		p.initState(o.State, chain.Stores(), groups)
		p.initClock()
	}
	p.st.tables = o.Tables
	if o.Repartition != nil {
		if o.State == nil {
			return nil, errors.New("pipeline: Options.Repartition needs Options.State")
		}
		if err := p.initHop(chain, *o.Repartition); err != nil {
			return nil, err
		}
	}
	for i := range p.pool.workers {
		p.pool.workers[i].renew(p.open.ctx)
	}
	return p, nil
}

// stateGroups are the stores of chain by the topic they are partitioned
// like: the one input topic's, or with a hop the repartition topic's for
// the stores from the hop stage on and the one input topic's for those
// before it.
func stateGroups(o Options, chain *transform.Chain) ([]stateGroup, error) {
	if !chain.Ordered() {
		return nil, errors.New("a stateful chain needs an ordered chain")
	}
	inputs := inputsBesidesHop(o)
	if o.Repartition == nil {
		if len(inputs) != 1 {
			return nil, errors.New("a stateful chain without a repartition hop needs exactly one input topic")
		}
		return []stateGroup{{topic: inputs[0], stores: chain.Stores()}}, nil
	}
	at, _, ok := chain.Hop()
	if !ok {
		return nil, errors.New("pipeline: Options.Repartition for a chain that needs no hop")
	}
	before := chain.StoresBefore(at)
	var groups []stateGroup
	if len(before) > 0 {
		if len(inputs) != 1 {
			return nil, errors.New("a stateful stage before the repartition hop needs exactly one input topic")
		}
		if _, ok := o.State.(StoreScoped); !ok {
			return nil, errors.New("pipeline: stores on both sides of a repartition hop need a StoreScoped State")
		}
		groups = append(groups, stateGroup{topic: inputs[0], stores: before})
	}
	return append(groups, stateGroup{topic: o.Repartition.Topic, stores: chain.Stores()[len(before):]}), nil
}

// withDefaults returns o with its defaults filled in, or an error naming
// what is missing or wrong.
func (o Options) withDefaults() (Options, error) {
	if o.OutputTopic == "" || o.CommitInterval <= 0 || o.MaxRecordsPerTxn <= 0 {
		return o, errRequired
	}
	if o.TransactionTimeout <= 0 {
		o.TransactionTimeout = time.Minute
	}
	o.TxnBudget = o.budget()
	if o.FailingAfter <= 0 {
		o.FailingAfter = defaultFailingAfter(o.TransactionTimeout)
	}
	switch o.OnError {
	case "":
		o.OnError = Fail
	case Fail, Skip:
	case DeadLetter:
		if o.DLQTopic == "" {
			return o, errors.New("pipeline: OnError DeadLetter needs a DLQTopic")
		}
	default:
		return o, fmt.Errorf("pipeline: unknown OnError %q", o.OnError)
	}
	switch o.Ordering {
	case "":
		o.Ordering = OrderPartition
	case OrderPartition, OrderKey:
	default:
		return o, fmt.Errorf("pipeline: unknown Ordering %q", o.Ordering)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.EndOffsetsInterval <= 0 {
		o.EndOffsetsInterval = 5 * time.Second
	}
	if o.MaxFutureSkew <= 0 {
		o.MaxFutureSkew = DefaultMaxFutureSkew
	}
	return o, nil
}
