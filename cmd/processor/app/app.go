// Package app is the processor's wiring: environment to config, the
// transactional session, the transform chain, the pipeline, HTTP and
// signals. It is a package rather than part of main so that a custom main
// can compile in its own transform plugins and call Main.
//
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.
package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitConfig  = 2
)

// Metrics are the handles of the processor's own metrics that
// Prepared.Build registers, for a caller that reads them directly (tests
// do); a scrape of the registry shows the same values.
type Metrics struct {
	// Txn: processor_transactions_*, processor_transaction_*,
	// processor_rebalances_total and processor_producer_fenced_total.
	Txn *txn.Metrics
	// Pipeline: processor_records_* and processor_transform_*.
	Pipeline *pipeline.Metrics
}

// Overrides are settings that config.Config has no variable for, for tests,
// fault drills and `processor replay`. The zero value overrides nothing:
// Prepare and Build then build exactly what Main runs.
type Overrides struct {
	// TxnBudget is how long a transaction may process before the watchdog
	// aborts it (reason "watchdog") and halves the batch. 0 keeps the
	// default, four fifths of cfg.TransactionTimeout. Past the transaction
	// timeout the broker aborts the transaction first (reason "timeout").
	TxnBudget time.Duration
	// FailingAfter is how long transactions may keep aborting with no
	// commit before the instance is unhealthy; 0 keeps the default, twice
	// cfg.TransactionTimeout and at least a minute.
	FailingAfter time.Duration
	// InjectAbort, when set, replaces the random aborts of
	// PROCESSOR_TEST_ABORT_RATE: it is called before each commit with the
	// transaction's sequence number (from 1), and returning true aborts
	// that transaction (reason "injected") instead of committing it.
	InjectAbort func(seq uint64) bool
	// Replay says the inputs are dead letters run again
	// (pipeline.Options.Replay), as `processor replay` runs them.
	Replay bool
}

// Prepared is a processor checked, as Main checks it, before anything
// connects: its configuration, its chains and the pipeline's options
// built from them, and its TLS and SASL material read. Build builds the
// instance that runs it once the brokers are known.
type Prepared struct {
	cfg    *config.Config
	chains []*transform.Chain
	log    *slog.Logger
	sec    *security
	// required maps the topics that must exist to the variable that names
	// each (requiredTopics); exitCode names them with it.
	required map[string]string
	opts     pipeline.Options // without the metrics, the destination's names, the state
}

// Prepare checks the processor of cfg, a configuration as config.Load
// returns it (validated), with its chains: one per worker, each built
// alike and used by no one else (the first runs alone on polls of one
// partition), before anything connects. The pipeline checks the chain
// and its options (pipeline.Check: one record's retries fit the
// transaction's budget, no fixed destination such as
// PROCESSOR_ROUTE_DEFAULT is an input or the dead-letter topic, a
// stateful chain is one whose stores the processor can keep in Kafka,
// pipeline.Changelogs), and the files of the TLS and SASL settings must
// be readable. Every refusal is an error naming the variable to change (a
// *settings.Error, pipelineError). The caller keeps the chains and closes
// them after the instance has run.
func Prepare(cfg *config.Config, chains []*transform.Chain, log *slog.Logger, ov Overrides) (*Prepared, error) {
	if len(chains) == 0 {
		return nil, errors.New("preparing the processor: no transform chain")
	}
	pr := &Prepared{cfg: cfg, chains: chains, log: log, required: requiredTopics(cfg, chains[0])}
	pr.opts = pipelineOptions(cfg, chains, pr.required, log, ov)
	pr.opts.Changelogs = &pipeline.Changelogs{AtLeastOnce: cfg.Guarantee != "exactly_once"}
	if cfg.Sink != "kafka" {
		pr.opts.Changelogs.Sink = cfg.Sink
		// The destination names its outputs and dead letters once it is
		// open (build); until then the sink's name stands in, and for the
		// dead letters a name no topic can have (a space), which no fixed
		// destination can be.
		pr.opts.OutputTopic, pr.opts.DLQTopic, pr.opts.RequireTopics = cfg.Sink, "", nil
		if cfg.OnError == "dlq" {
			pr.opts.DLQTopic = cfg.Sink + " dead letters"
		}
	}
	if err := pipeline.Check(chains[0], pr.opts); err != nil {
		return nil, pipelineError(cfg, err)
	}
	if err := checkJoins(chains[0]); err != nil {
		return nil, err
	}
	sec, err := loadSecurity(cfg, log)
	if err != nil {
		return nil, err
	}
	pr.sec = sec
	return pr, nil
}

// Instance is one processor instance as Main runs it: the pipeline, the
// transactional session it runs on, and the metrics they report through.
type Instance struct {
	Pipeline *pipeline.Pipeline
	Metrics  *Metrics
	sess     *txn.Session
}

// Run runs the pipeline on its session (pipeline.Pipeline.Run) until ctx
// ends or a fatal error; the session is closed when it returns.
func (in *Instance) Run(ctx context.Context) error {
	return in.Pipeline.Run(ctx, in.sess, in.sess)
}

// Build builds the instance of pr on brokers, which stand in for
// cfg.Brokers so that an embedded broker's addresses can be passed: the
// transactional session (consumer group cfg.Group on cfg.InputTopics,
// producer cfg.TransactionalID) and the pipeline that runs pr's chains on
// it, writing to db, the destination of cfg.Sink opened by the caller
// (ignored for the kafka sink). It registers the
// processor's metrics, and the Kafka client's (kprom, processor_kafka_*),
// with promReg, and returns their handles; promReg must not hold them
// already (registering twice panics), so every instance needs a registry
// of its own.
//
// The pipeline requires the output topic, the dead-letter topic (with
// PROCESSOR_ON_ERROR=dlq) and the chain's fixed destinations (such as
// PROCESSOR_ROUTE_DEFAULT) to exist: its Run returns a
// *pipeline.MissingTopicsError otherwise. PROCESSOR_TEST_ABORT_RATE, unless
// Overrides.InjectAbort replaces it, aborts that fraction of
// transactions, with a warning on log.
//
// The Kafka client is created here and starts joining the group at once,
// so call Run promptly: Run initialises the transactional producer and
// closes the session when it returns. The session's clients reach the
// brokers as cfg's PROCESSOR_TLS_* and PROCESSOR_SASL_* say; brokers that
// refuse them, or that they do not trust, make Run return a
// *txn.AccessError at once.
func (pr *Prepared) Build(brokers []string, db OpenSink, promReg *prometheus.Registry) (*Instance, error) {
	return pr.build(brokers, promReg, reached{db: openedBy(pr.cfg, db)})
}

// reached is what Main opens once the brokers are reachable, for the
// instance it builds on them: the sink's destination (nil for kafka), the
// stores of a stateful chain and its repartition hop, and the offsets
// `processor replay` stops at (txn.Options.StopAt).
type reached struct {
	db     *opened
	state  *state.Manager
	hop    *pipeline.Repartition
	stopAt map[string]map[int32]int64
	tables *tables // the join stages' tables; nil or empty without
}

// build is Build with what Main opened on the brokers.
func (pr *Prepared) build(brokers []string, promReg *prometheus.Registry, r reached) (*Instance, error) {
	cfg, opts := pr.cfg, pr.opts
	if cfg.Sink != "kafka" {
		if r.db == nil {
			return nil, fmt.Errorf("building the processor: PROCESSOR_SINK=%s without its destination open", cfg.Sink)
		}
		opts.OutputTopic, opts.DLQTopic = r.db.outputs, r.db.deadLetters
		if cfg.OnError != "dlq" {
			opts.DLQTopic = ""
		}
	}
	m := &Metrics{Txn: txn.NewMetrics(promReg), Pipeline: pipeline.NewMetrics(promReg)}
	opts.Metrics = m.Pipeline
	so := sessionOptions(cfg, pr.sec, brokers, opts.RequireTopics, promReg, pr.log)
	so.Metrics, so.StopAt = m.Txn, r.stopAt
	if r.db != nil {
		so.Destination, so.DestinationName = r.db.dest, r.db.name
	}
	if r.state != nil {
		// The changelogs' max.message.bytes bounds a state write
		// (state.Journal).
		so.OutputTopics = append(slices.Clip(so.OutputTopics), r.state.Topics()...)
		so.ClientOpts = append(so.ClientOpts, statePartitioner(r.state, r.hop))
		opts.State = stateStores{r.state}
	}
	if rp := r.hop; rp != nil {
		so.Topics = withHop(so.Topics, rp)
		opts.InputTopics = withHop(opts.InputTopics, rp)
		opts.Repartition = rp
		// Required as the changelogs are: deleted while running, it stops
		// the processor.
		opts.RequireTopics = append(slices.Clip(opts.RequireTopics), rp.Topic)
		so.OutputTopics = append(slices.Clip(so.OutputTopics), rp.Topic)
	}
	if r.tables != nil {
		opts.Tables = r.tables.pipelineTables()
	}
	// Before the session exists, so that what cannot work leaves no
	// client behind.
	p, err := pipeline.New(pr.chains[0], opts)
	if err != nil {
		return nil, fmt.Errorf("building the pipeline: %w", pipelineError(cfg, err))
	}
	sess, err := txn.New(so)
	if err != nil {
		return nil, fmt.Errorf("creating the transactional session: %w", err)
	}
	return &Instance{Pipeline: p, Metrics: m, sess: sess}, nil
}

// sessionOptions are the transactional session's options from cfg, on
// brokers with sec's TLS and SASL, producing to outputs.
func sessionOptions(cfg *config.Config, sec *security, brokers, outputs []string, promReg *prometheus.Registry, log *slog.Logger) txn.Options {
	return txn.Options{
		Brokers:            brokers,
		Group:              cfg.Group,
		Topics:             cfg.InputTopics,
		TransactionalID:    cfg.TransactionalID,
		InstanceID:         cfg.InstanceID,
		SessionTimeout:     cfg.SessionTimeout,
		TransactionTimeout: cfg.TransactionTimeout,
		Guarantee:          txn.Guarantee(cfg.Guarantee),
		MaxCrashAttempts:   cfg.MaxCrashAttempts,
		OutputTopics:       outputs,
		Logger:             log,
		ClientOpts:         append([]kgo.Opt{kgo.WithHooks(newKafkaMetrics(promReg))}, groupClientOpts(cfg)...),
		ConnOpts:           sec.connOpts(),
		ClientID:           cfg.ClientID,
		StartOffset:        startOffset(cfg, time.Now()),
		MaxBatchBytes:      int32(cfg.ProduceBatchMaxBytes),
	}
}

// pipelineOptions are the loop's options from cfg, for the kafka sink,
// with chains' first chain run first and the others by more workers, and
// required the topics that must exist (requiredTopics): what the
// processor runs, and what `processor try` runs on its samples.
func pipelineOptions(cfg *config.Config, chains []*transform.Chain, required map[string]string, log *slog.Logger, ov Overrides) pipeline.Options {
	inject := ov.InjectAbort
	if inject == nil {
		inject = injectAbort(cfg.TestAbortRate, log)
	}
	lineageOn, legacyLineage := cfg.Lineage()
	return pipeline.Options{
		OutputTopic:        cfg.OutputTopic,
		CommitInterval:     cfg.CommitInterval,
		MaxFutureSkew:      cfg.MaxFutureSkew,
		LateTopic:          cfg.LateTopic,
		MaxRecordsPerTxn:   cfg.MaxRecordsPerTxn,
		MaxTxnBytes:        int64(cfg.MaxTxnBytes),
		InputTopics:        cfg.InputTopics,
		TransactionTimeout: cfg.TransactionTimeout,
		ProgressInterval:   cfg.ProgressInterval,
		Lineage:            lineageOn,
		LegacyLineage:      legacyLineage,
		OnError:            pipeline.OnError(cfg.OnError),
		DLQTopic:           cfg.DLQTopic,
		MaxRetries:         cfg.MaxRetries,
		TransformTimeout:   cfg.TransformTimeout,
		TxnBudget:          ov.TxnBudget,
		FailingAfter:       ov.FailingAfter,
		RequireTopics:      slices.Sorted(maps.Keys(required)),
		Logger:             log,
		InjectAbort:        inject,
		InjectCrash:        injectCrash(cfg.TestCrashOn, log),
		Chains:             chains[1:],
		Ordering:           pipeline.Ordering(cfg.Ordering),
		SettingName:        pipelineSetting,
		Replay:             ov.Replay,
	}
}

// injectCrash returns the fault-drill hook that kills the process (SIGKILL
// to itself, which nothing can catch or clean up after) when a record
// whose value contains marker starts through the chain, or nil when
// marker is empty.
func injectCrash(marker string, log *slog.Logger) func(*kgo.Record) {
	if marker == "" {
		return nil
	}
	log.Warn("FAULT DRILL: PROCESSOR_TEST_CRASH_ON kills the process on records that contain it; never use it in production", "marker", marker)
	m := []byte(marker)
	return func(r *kgo.Record) {
		if bytes.Contains(r.Value, m) {
			log.Warn("FAULT DRILL: killing the process on a record", "partition", r.Partition, "offset", r.Offset)
			if self, err := os.FindProcess(os.Getpid()); err == nil {
				_ = self.Kill() // SIGKILL
			}
			select {} // the signal is on its way
		}
	}
}

// injectAbort returns the fault-drill hook that aborts a fraction of
// transactions, or nil when the rate is 0.
func injectAbort(rate float64, log *slog.Logger) func(uint64) bool {
	if rate <= 0 {
		return nil
	}
	log.Warn("FAULT DRILL: PROCESSOR_TEST_ABORT_RATE aborts transactions on purpose; never use it in production", "rate", rate)
	return func(uint64) bool { return rand.Float64() < rate }
}
