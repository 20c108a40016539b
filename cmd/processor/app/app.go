// Package app is the processor's wiring: environment to config, the
// transactional session, the transform chain, the pipeline, HTTP and
// signals. It is a package rather than part of main so that a custom main
// can compile in its own transform plugins and call Main.
//
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitConfig  = 2
)

// Main runs the processor with the transforms registered in reg (usually
// transform.Default) and returns the exit code for os.Exit. It never exits
// the process itself, so a custom main decides what happens after it.
func Main(reg *transform.Registry) int {
	if code, handled := runCommand(os.Args[1:], reg, os.Stdout, os.Stderr); handled {
		return code // processor config, processor --help
	}
	// Signals first: a SIGTERM that arrives while starting (a module
	// compiling, a broker unreachable) stops the processor cleanly rather
	// than killing it.
	ctx, again, stop := handleSignals()
	defer stop()

	cfg, err := config.Load(config.Hostname())
	if err != nil {
		return configError(err)
	}
	log := newLogger(cfg)
	warnUnknownVars(log, reg, cfg.Transforms)

	chains, err := buildChains(reg, cfg, workers(cfg))
	inUse := false // a run abandoned by a second signal may still use the chains
	defer func() {
		if inUse {
			return
		}
		for _, c := range chains {
			if err := c.Close(); err != nil {
				log.Warn("closing transforms", "err", err.Error())
			}
		}
	}()
	if err != nil {
		return configError(err)
	}
	chain := chains[0]
	if err := checkBudget(cfg, chain); err != nil {
		return configError(err)
	}
	if err := checkDestinations(cfg, chain); err != nil {
		return configError(err)
	}
	// The TLS and SASL files, before anything connects.
	sec, err := loadSecurity(cfg)
	if err != nil {
		return configError(err)
	}
	if cfg.SASLMechanism == "PLAIN" && !cfg.TLSEnabled && !cfg.EmbeddedBroker {
		log.Warn("PROCESSOR_SASL_MECHANISM=PLAIN without PROCESSOR_TLS_ENABLED=true: the password crosses the network readable; use TLS, or a SCRAM mechanism")
	}
	if ctx.Err() != nil {
		log.Info("stopped while starting")
		return exitOK
	}
	// The HTTP port before anything connects: a port in use is a
	// configuration error, found before a client joins the group.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return configError(&config.Error{Var: config.EnvName("HTTP_ADDR"), Value: cfg.HTTPAddr,
			Want: "a free host:port (" + err.Error() + ")"})
	}
	defer ln.Close() // for the early returns; the server's Shutdown closes it too

	// HTTP from the first moment: while the embedded broker starts or the
	// database is unreachable, /healthz says alive and /readyz not ready,
	// so a startup probe does not kill a processor that is only waiting.
	promReg := newRegistry()
	ep := newEndpoints(cfg, chain, len(chains))
	srv := serveHTTP(ln, promReg, ep)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	if cfg.EmbeddedBroker {
		ep.starting("starting the embedded broker")
	}
	brokers, closeBroker, code := connectBrokers(ctx, cfg, sec, log)
	if brokers == nil {
		return code
	}
	defer closeBroker()

	if cfg.Sink == "postgres" {
		ep.starting("connecting to PostgreSQL")
	}
	db, err := openDatabase(ctx, cfg, promReg, log)
	switch {
	case err != nil && ctx.Err() != nil:
		log.Info("stopped while starting")
		return exitOK
	case err != nil:
		return configError(err)
	case db != nil:
		defer db.Close()
	}
	required := requiredTopics(cfg, chain)
	p, _, err := newPipeline(cfg, sec, brokers, chains, db, promReg, log, Overrides{})
	if err != nil {
		log.Error("building the processor", "err", err.Error())
		return exitRuntime
	}
	ep.run(p)

	log.Info("processor starting", append([]any{"version", version(), "guarantee", cfg.Guarantee,
		"sink", cfg.Sink, "brokers", strings.Join(brokers, ","), "group", cfg.Group, "input_topics", strings.Join(cfg.InputTopics, ","),
		"output_topic", cfg.OutputTopic, "transactional_id", cfg.TransactionalID, "transforms", strings.Join(cfg.Transforms, ","),
		"commit_interval", cfg.CommitInterval.String(), "max_records_per_txn", cfg.MaxRecordsPerTxn, "workers", len(chains), "http_addr", cfg.HTTPAddr},
		sec.logAttrs()...)...)

	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case err = <-done:
		return exitCode(err, cfg, required, p, log)
	case <-again:
		inUse = true
		log.Error("second signal: exiting without finishing the open transaction (it will be aborted)")
		return exitRuntime
	}
}

// handleSignals returns a context that the first SIGINT or SIGTERM
// cancels, a channel that a second one closes (give up finishing the open
// transaction), and a function that stops listening.
func handleSignals() (ctx context.Context, again <-chan struct{}, stop func()) {
	ctx, stopFirst := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	second := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-quit:
			return
		}
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM) // before stopFirst, so no signal goes unhandled
		defer signal.Stop(c)
		stopFirst()
		select {
		case <-c:
			close(second)
		case <-quit:
		}
	}()
	var once sync.Once
	return ctx, second, func() {
		once.Do(func() {
			close(quit)
			stopFirst()
		})
	}
}

// checkBudget fails, before anything connects, when one record's retries
// cannot fit the transaction's time budget.
func checkBudget(cfg *config.Config, chain *transform.Chain) error {
	var budget *pipeline.BudgetError
	if err := pipeline.CheckBudget(pipeline.Options{StallTimeout: cfg.TransactionTimeout, MaxRetries: cfg.MaxRetries,
		TransformTimeout: cfg.TransformTimeout}, chain); errors.As(err, &budget) {
		return budgetError(cfg, budget)
	}
	return nil
}

// connectBrokers returns the seed brokers, starting the embedded broker
// when configured (with SASL, as sec says), and how to stop it. When it
// returns no brokers, code is the exit code.
func connectBrokers(ctx context.Context, cfg *config.Config, sec *security, log *slog.Logger) (brokers []string, closeBroker func(), code int) {
	if !cfg.EmbeddedBroker {
		return cfg.Brokers, func() {}, exitOK
	}
	eb, err := startEmbeddedBroker(ctx, cfg, sec, log)
	switch {
	case err != nil && ctx.Err() != nil:
		log.Info("stopped while starting")
		return nil, nil, exitOK
	case err != nil:
		log.Error("starting the embedded broker failed", "err", err.Error())
		return nil, nil, exitRuntime
	}
	return eb.Addrs(), eb.Close, exitOK
}

// newRegistry returns the Prometheus registry with the Go runtime and
// process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg)
	return reg
}

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
// read or parsed (a *config.Error), when one record's retries cannot fit
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
	sec, err := loadSecurity(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building the processor: %w", err)
	}
	return newPipeline(cfg, sec, brokers, chains, db, promReg, log, ov)
}

// newPipeline is NewPipeline for a cfg that has validated, with its TLS
// and SASL files already read into sec (as Main does before connecting).
func newPipeline(cfg *config.Config, sec *security, brokers []string, chains []*transform.Chain, db *pgsink.Sink,
	promReg *prometheus.Registry, log *slog.Logger, ov Overrides) (*pipeline.Pipeline, *Metrics, error) {
	if len(chains) == 0 {
		return nil, nil, errors.New("building the processor: no transform chain")
	}
	chain := chains[0]
	inject := ov.InjectAbort
	if inject == nil {
		inject = injectAbort(cfg.TestAbortRate, log)
	}
	opts := pipeline.Options{
		OutputTopic:      cfg.OutputTopic,
		CommitInterval:   cfg.CommitInterval,
		MaxRecordsPerTxn: cfg.MaxRecordsPerTxn,
		MaxTxnBytes:      int64(cfg.MaxTxnBytes),
		InputTopics:      cfg.InputTopics,
		StallTimeout:     cfg.TransactionTimeout,
		ProgressInterval: cfg.ProgressInterval,
		Lineage:          cfg.LineageHeaders,
		OnError:          pipeline.OnError(cfg.OnError),
		DLQTopic:         cfg.DLQTopic,
		MaxRetries:       cfg.MaxRetries,
		TransformTimeout: cfg.TransformTimeout,
		TxnBudget:        ov.TxnBudget,
		FailingAfter:     ov.FailingAfter,
		RequireTopics:    slices.Sorted(maps.Keys(requiredTopics(cfg, chain))),
		Logger:           log,
		InjectAbort:      inject,
		Chains:           chains[1:],
	}
	if cfg.Sink == "postgres" {
		if db == nil {
			return nil, nil, errors.New("building the processor: PROCESSOR_SINK=postgres without a database")
		}
		opts.OutputTopic, opts.DLQTopic = postgresNames(cfg)
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
	sess, err := txn.New(txn.Options{
		Brokers:            brokers,
		Group:              cfg.Group,
		Topics:             cfg.InputTopics,
		TransactionalID:    cfg.TransactionalID,
		InstanceID:         cfg.InstanceID,
		SessionTimeout:     cfg.SessionTimeout,
		TransactionTimeout: cfg.TransactionTimeout,
		AtLeastOnce:        cfg.Guarantee == "at_least_once",
		Database:           db,
		OutputTopics:       opts.RequireTopics,
		Logger:             log,
		Metrics:            m.Txn,
		ClientOpts:         []kgo.Opt{kgo.WithHooks(newKafkaMetrics(promReg))},
		ConnOpts:           sec.connOpts(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the transactional session: %w", err)
	}
	p, err := pipeline.New(sess, chain, opts)
	if err != nil {
		sess.Close()
		return nil, nil, fmt.Errorf("building the pipeline: %w", err)
	}
	return p, m, nil
}

// exitCode logs how the run ended and returns the exit code.
func exitCode(err error, cfg *config.Config, required map[string]string, p *pipeline.Pipeline, log *slog.Logger) int {
	var fenced *txn.FencedError
	var missing *pipeline.MissingTopicsError
	var recErr *pipeline.RecordError
	var access *txn.AccessError
	switch {
	case err == nil:
		s := p.Stats()
		log.Info("processor stopped cleanly", "records_consumed", s.Consumed, "records_produced", s.Produced,
			"transactions_committed", s.Commits, "transactions_aborted", s.Aborts)
		return exitOK
	case errors.As(err, &missing) && missing.Deleted:
		var named []string
		for _, t := range missing.Topics {
			named = append(named, fmt.Sprintf("%q (%s)", t, required[t]))
		}
		what := "the topic " + named[0] + " does not exist any more: it was deleted while the processor ran, and every transaction would abort; create it again"
		if len(named) > 1 {
			what = "the topics " + strings.Join(named, ", ") + " do not exist any more: they were deleted while the processor ran, and every transaction would abort; create them again"
		}
		log.Error("stopping: " + what)
	case errors.As(err, &missing):
		value := missing.Topics[0]
		return configError(&config.Error{Var: required[value], Value: value,
			Want: "a topic that exists in the cluster (it does not; create it first, e.g. kafka-topics.sh --create --topic " + value + ")"})
	case errors.As(err, &fenced):
		log.Error("stopping: " + err.Error())
	case errors.As(err, &access):
		log.Error("stopping: " + accessMessage(access, cfg))
	case errors.As(err, &recErr):
		msg := "stopping: a record failed and PROCESSOR_ON_ERROR=fail; nothing from this record on was committed, and a restart meets the same record again (set PROCESSOR_ON_ERROR=dlq to set it aside)"
		if cfg.OnError != "fail" {
			msg = "stopping: a record failed and its dead letter cannot be written even without its value; nothing from this record on was committed, and a restart meets the same record again (check the dead-letter topic and its max.message.bytes)"
		}
		log.Error(msg, "topic", recErr.Source.Topic, "partition", recErr.Source.Partition, "offset", recErr.Source.Offset, "err", recErr.Err.Error())
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return configError(&config.Error{Var: config.EnvName("TRANSACTION_TIMEOUT"), Value: cfg.TransactionTimeout.String(),
			Want: "a duration the broker accepts: at most its transaction.max.timeout.ms (15m by default)"})
	default:
		log.Error("stopping: " + err.Error())
	}
	return exitRuntime
}

// requiredTopics maps the topics that must exist before processing starts
// (the output topic, the dead-letter topic, and the fixed destinations of
// the chain's transforms, such as PROCESSOR_ROUTE_DEFAULT) to the variable
// that names each.
func requiredTopics(cfg *config.Config, chain *transform.Chain) map[string]string {
	topics := map[string]string{cfg.OutputTopic: config.EnvName("OUTPUT_TOPIC")}
	if cfg.OnError == "dlq" {
		topics[cfg.DLQTopic] = config.EnvName("DLQ_TOPIC")
	}
	for _, d := range chain.Destinations() {
		if _, ok := topics[d.Topic]; !ok {
			topics[d.Topic] = PluginVar(d.Entry.Plugin(), d.Setting)
		}
	}
	return topics
}

// checkDestinations refuses, before anything connects, a fixed destination
// of the chain (such as PROCESSOR_ROUTE_DEFAULT) that is an input topic,
// which would feed the processor its own output, or the dead-letter topic,
// which would mix outputs into the dead letters. Records routed there at
// run time fail under the policy; a fixed destination would fail them all.
func checkDestinations(cfg *config.Config, chain *transform.Chain) error {
	for _, d := range chain.Destinations() {
		why := ""
		switch {
		case slices.Contains(cfg.InputTopics, d.Topic):
			why = "a topic that is not also in PROCESSOR_INPUT_TOPICS (the processor would consume its own output forever)"
		case cfg.Sink != "postgres" && cfg.DLQTopic != "" && d.Topic == cfg.DLQTopic:
			why = "a topic other than PROCESSOR_DLQ_TOPIC (outputs would be mixed into the dead letters)"
		default:
			continue
		}
		return &config.Error{Var: PluginVar(d.Entry.Plugin(), d.Setting), Value: d.Topic, Want: why}
	}
	return nil
}

// budgetError names the setting to change when one record's retries
// cannot fit the transaction's time budget.
func budgetError(cfg *config.Config, e *pipeline.BudgetError) error {
	fits := fmt.Sprintf("a value with which one record's %d attempts fit four fifths of PROCESSOR_TRANSACTION_TIMEOUT (%s): %s",
		e.Attempts, e.Budget, e.Error())
	switch {
	case e.Entry != (transform.Entry{}):
		return &config.Error{Var: PluginVar(e.Entry.Plugin(), "TIMEOUT"), Value: e.PerAttempt.String(), Want: fits}
	case e.PerAttempt > 0:
		return &config.Error{Var: config.EnvName("TRANSFORM_TIMEOUT"), Value: cfg.TransformTimeout.String(), Want: fits}
	}
	return &config.Error{Var: config.EnvName("MAX_RETRIES"), Value: strconv.Itoa(cfg.MaxRetries), Want: fits}
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

// configError prints one line for a configuration mistake and returns 2.
func configError(err error) int {
	fmt.Fprintln(os.Stderr, "processor: configuration error: "+oneLine(err.Error()))
	return exitConfig
}

// oneLine joins the lines of a message (a driver's error may list one
// line per address it tried) with "; ".
func oneLine(msg string) string {
	lines := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "; ")
}

func newLogger(cfg *config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}
