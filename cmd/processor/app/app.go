// Package app is the processor's wiring: environment to config, the
// transactional session, the transform chain, the pipeline, HTTP and
// signals. It is a package rather than part of main so that a custom main
// can compile in its own transform plugins and call Main.
//
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.
package app

import (
	"bytes"
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
	"github.com/streamproc/processor/pgsink"
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

// Metrics are the handles of the processor's own metrics that NewPipeline
// registers, for a caller that reads them directly (tests do); a scrape of
// the registry shows the same values.
type Metrics struct {
	// Txn: processor_transactions_*, processor_transaction_*,
	// processor_rebalances_total and processor_producer_fenced_total.
	Txn *txn.Metrics
	// Pipeline: processor_records_* and processor_transform_*.
	Pipeline *pipeline.Metrics
}

// Overrides are settings that config.Config has no variable for, for tests
// and fault drills only. The zero value overrides nothing: NewPipeline then
// builds exactly what Main runs.
type Overrides struct {
	// State, when set, is the stores of a stateful chain: the pipeline
	// writes them in its transactions and the producer keeps their
	// changelog records' partitions.
	State *state.Manager
	// Repartition, when set, is the repartition hop of a stateful chain
	// (openRepartition): the session consumes its topic too.
	Repartition *pipeline.Repartition
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
	// StopAt and Replay are what `processor replay` runs with: the
	// session reads no record at or past StopAt (txn.Options.StopAt),
	// and the inputs are dead letters run again (pipeline.Options.Replay).
	StopAt map[string]map[int32]int64
	Replay bool
}

// NewPipeline builds one processor instance from cfg the way Main does:
// the transactional session (consumer group cfg.Group on cfg.InputTopics,
// producer cfg.TransactionalID) on brokers, which stand in for cfg.Brokers
// so that an embedded broker's addresses can be passed, and the pipeline
// that runs chains on it: one chain per worker, each built alike and used
// by no one else (the first runs alone on polls of one partition). It registers the processor's metrics, and the
// Kafka client's (kprom, processor_kafka_*), with promReg, and returns
// their handles; promReg must not hold them already (registering twice
// panics), so every instance needs a registry of its own.
//
// The pipeline requires the output topic, the dead-letter topic (with
// PROCESSOR_ON_ERROR=dlq) and the chain's fixed destinations (such as
// PROCESSOR_ROUTE_DEFAULT) to exist: its Run returns a
// *pipeline.MissingTopicsError otherwise. PROCESSOR_TEST_ABORT_RATE, unless
// ov.InjectAbort replaces it, aborts that fraction of transactions, with a
// warning on log.
//
// The Kafka client is created here and starts joining the group at once,
// so call Run promptly: Run initialises the transactional producer and
// closes the session when it returns. The caller keeps the chains and
// closes them after Run has returned. NewPipeline fails, leaving nothing open, when cfg
// does not validate or the files of its TLS and SASL settings cannot be
// read or parsed (a *settings.Error), when one record's retries cannot fit
// the transaction's budget (a *pipeline.BudgetError), or when the Kafka
// client cannot be created.
//
// The session's clients reach the brokers as cfg's PROCESSOR_TLS_* and
// PROCESSOR_SASL_* say; brokers that refuse them, or that they do not
// trust, make Run return a *txn.AccessError at once.
func NewPipeline(cfg *config.Config, brokers []string, chains []*transform.Chain, db *pgsink.Sink, promReg *prometheus.Registry,
	log *slog.Logger, ov Overrides) (*pipeline.Pipeline, *Metrics, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, fmt.Errorf("building the processor: %w", err)
	}
	if len(chains) > 0 {
		if err := checkDestinations(cfg, chains[0]); err != nil {
			return nil, nil, fmt.Errorf("building the processor: %w", err)
		}
	}
	sec, err := loadSecurity(cfg, log)
	if err != nil {
		return nil, nil, fmt.Errorf("building the processor: %w", err)
	}
	return newPipeline(cfg, sec, brokers, chains, openedPostgres(db), promReg, log, ov)
}

// newPipeline is NewPipeline for a cfg that has validated, with its TLS
// and SASL files already read into sec (as Main does before connecting).
func newPipeline(cfg *config.Config, sec *security, brokers []string, chains []*transform.Chain, db *opened,
	promReg *prometheus.Registry, log *slog.Logger, ov Overrides) (*pipeline.Pipeline, *Metrics, error) {
	if len(chains) == 0 {
		return nil, nil, errors.New("building the processor: no transform chain")
	}
	chain := chains[0]
	opts := pipelineOptions(cfg, chains, log, ov)
	if cfg.Sink != "kafka" {
		if db == nil {
			return nil, nil, fmt.Errorf("building the processor: PROCESSOR_SINK=%s without its destination open", cfg.Sink)
		}
		opts.OutputTopic, opts.DLQTopic = db.outputs, db.deadLetters
		if cfg.OnError != "dlq" {
			opts.DLQTopic = ""
		}
		opts.RequireTopics = nil
	}
	// Before the session exists, so that a budget that cannot work leaves
	// no client behind (pipeline.New checks it again).
	if err := pipeline.CheckBudget(opts, chain); err != nil {
		return nil, nil, fmt.Errorf("building the pipeline: %w", err)
	}
	m := &Metrics{Txn: txn.NewMetrics(promReg), Pipeline: pipeline.NewMetrics(promReg)}
	opts.Metrics = m.Pipeline
	so := txn.Options{
		Brokers:            brokers,
		Group:              cfg.Group,
		Topics:             cfg.InputTopics,
		TransactionalID:    cfg.TransactionalID,
		InstanceID:         cfg.InstanceID,
		SessionTimeout:     cfg.SessionTimeout,
		TransactionTimeout: cfg.TransactionTimeout,
		Guarantee:          txn.Guarantee(cfg.Guarantee),
		MaxCrashAttempts:   cfg.MaxCrashAttempts,
		OutputTopics:       opts.RequireTopics,
		Logger:             log,
		Metrics:            m.Txn,
		ClientOpts:         append([]kgo.Opt{kgo.WithHooks(newKafkaMetrics(promReg))}, groupClientOpts(cfg)...),
		ConnOpts:           sec.connOpts(),
		ClientID:           cfg.ClientID,
		StartOffset:        startOffset(cfg, time.Now()),
		MaxBatchBytes:      int32(cfg.ProduceBatchMaxBytes),
		StopAt:             ov.StopAt,
	}
	opts.Replay = ov.Replay
	if db != nil {
		so.Destination, so.DestinationName = db.dest, db.name
	}
	if ov.State != nil {
		// The changelogs' max.message.bytes bounds a state write
		// (state.Journal).
		so.OutputTopics = append(slices.Clip(so.OutputTopics), ov.State.Topics()...)
		so.ClientOpts = append(so.ClientOpts, statePartitioner(ov.State, ov.Repartition))
		opts.State = stateStores{ov.State}
	}
	if rp := ov.Repartition; rp != nil {
		so.Topics = withHop(so.Topics, rp)
		opts.InputTopics = withHop(opts.InputTopics, rp)
		opts.Repartition = rp
		// Required as the changelogs are: deleted while running, it stops
		// the processor.
		opts.RequireTopics = append(slices.Clip(opts.RequireTopics), rp.Topic)
		so.OutputTopics = append(slices.Clip(so.OutputTopics), rp.Topic)
	}
	sess, err := txn.New(so)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the transactional session: %w", err)
	}
	p, err := pipeline.New(sess, sess, chain, opts)
	if err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("building the pipeline: %w", err)
	}
	return p, m, nil
}

// pipelineOptions are the loop's options from cfg, for the kafka sink,
// with chains' first chain run first and the others by more workers:
// what the processor runs, and what `processor try` runs on its samples.
func pipelineOptions(cfg *config.Config, chains []*transform.Chain, log *slog.Logger, ov Overrides) pipeline.Options {
	inject := ov.InjectAbort
	if inject == nil {
		inject = injectAbort(cfg.TestAbortRate, log)
	}
	lineageOn, legacyLineage := cfg.Lineage()
	return pipeline.Options{
		OutputTopic:      cfg.OutputTopic,
		CommitInterval:   cfg.CommitInterval,
		MaxFutureSkew:    cfg.MaxFutureSkew,
		LateTopic:        cfg.LateTopic,
		MaxRecordsPerTxn: cfg.MaxRecordsPerTxn,
		MaxTxnBytes:      int64(cfg.MaxTxnBytes),
		InputTopics:      cfg.InputTopics,
		StallTimeout:     cfg.TransactionTimeout,
		ProgressInterval: cfg.ProgressInterval,
		Lineage:          lineageOn,
		LegacyLineage:    legacyLineage,
		OnError:          pipeline.OnError(cfg.OnError),
		DLQTopic:         cfg.DLQTopic,
		MaxRetries:       cfg.MaxRetries,
		TransformTimeout: cfg.TransformTimeout,
		TxnBudget:        ov.TxnBudget,
		FailingAfter:     ov.FailingAfter,
		RequireTopics:    slices.Sorted(maps.Keys(requiredTopics(cfg, chains[0]))),
		Logger:           log,
		InjectAbort:      inject,
		InjectCrash:      injectCrash(cfg.TestCrashOn, log),
		Chains:           chains[1:],
		Ordering:         pipeline.Ordering(cfg.Ordering),
		SettingName:      pipelineSetting,
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
