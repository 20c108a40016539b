package app

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/interrupt"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/state"
	"github.com/streamproc/processor/transform"
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

	s, code := setUp(ctx, reg)
	if s == nil {
		return code
	}
	code, abandoned := s.run(ctx, again)
	if !abandoned { // a run abandoned by a second signal may still use the chains
		s.closeChains()
	}
	return code
}

// startup is what Main prepares before anything connects: the
// configuration, the logger, the chains, the TLS and SASL material and the
// HTTP listener.
type startup struct {
	cfg    *config.Config
	log    *slog.Logger
	chains []*transform.Chain
	prep   *Prepared    // the configuration and chains checked
	sec    *security    // prep's TLS and SASL material
	dest   *destination // the sink of PROCESSOR_SINK; nil for kafka
	sch    *schemas     // the key and value formats; nil when all are raw
	ln     net.Listener
	token  *httpToken // PROCESSOR_HTTP_TOKEN_FILE's; nil without one
}

// setUp loads and checks everything that needs no network: a mistake is
// a configuration error (exit 2) found before a client joins the group.
// It returns nil and the exit code when the processor must not run.
func setUp(ctx context.Context, reg *transform.Registry) (*startup, int) {
	cfg, err := config.Load(config.Hostname())
	if err != nil {
		return nil, configError(withUnknownVars(reg, err))
	}
	log := newLogger(cfg)
	if err := checkUnknownVars(log, reg, cfg.Transforms, cfg.AllowUnknownVariables); err != nil {
		return nil, configError(err)
	}
	s := &startup{cfg: cfg, log: log}
	if cfg.EmbeddedBroker && !embeddedBuilt {
		return nil, configError(&settings.Error{Var: config.EnvName("EMBEDDED_BROKER"), Value: "true",
			Want: settings.Say("false: this build has no embedded broker (built with -tags noembedded); set " + config.EnvName("BROKERS") + " instead")})
	}
	if cfg.EmbeddedSchemaRegistry && !embeddedBuilt {
		return nil, configError(&settings.Error{Var: config.EnvName("EMBEDDED_SCHEMA_REGISTRY"), Value: "true",
			Want: settings.Say("false: this build has no embedded Schema Registry (built with -tags noembedded); set " + config.EnvName("SCHEMA_REGISTRY_URL") + " instead")})
	}
	s.chains, err = buildChains(reg, cfg, workers(cfg))
	if err == nil { // the chain, its options, the TLS and SASL files
		s.prep, err = Prepare(cfg, s.chains, log, Overrides{})
	}
	if err == nil {
		s.sec = s.prep.sec
	}
	if err == nil { // the status page's bearer token
		s.token, err = loadHTTPToken(cfg.HTTPTokenFile)
	}
	if err == nil {
		s.dest, err = chooseSink(sink.Default, cfg)
	}
	if err == nil { // the registry's TLS, password and schema files
		s.sch, err = loadSchemas(cfg)
	}
	// fail reports a configuration error, then closes the chains, as the
	// processor does when it exits.
	fail := func(err error) (*startup, int) {
		code := configError(err)
		s.closeChains()
		return nil, code
	}
	if err != nil {
		return fail(err)
	}
	if cfg.SASLMechanism == "PLAIN" && !cfg.TLSEnabled && !cfg.EmbeddedBroker {
		log.Warn("PROCESSOR_SASL_MECHANISM=PLAIN without PROCESSOR_TLS_ENABLED=true: the password crosses the network readable; use TLS, or a SCRAM mechanism")
	}
	if cfg.SASLMechanism == config.OAuthBearer && !cfg.TLSEnabled {
		log.Warn("PROCESSOR_SASL_MECHANISM=OAUTHBEARER without PROCESSOR_TLS_ENABLED=true: the tokens cross the network readable; use TLS")
	}
	if ctx.Err() != nil {
		log.Info("stopped while starting")
		s.closeChains()
		return nil, exitOK
	}
	// The HTTP port before anything connects: a port in use is a
	// configuration error, found before a client joins the group.
	s.ln, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fail(&settings.Error{Var: config.EnvName("HTTP_ADDR"), Value: cfg.HTTPAddr,
			Want: settings.Say("a free host:port (" + err.Error() + ")")})
	}
	return s, exitOK
}

// closeChains closes the transforms of every chain.
func (s *startup) closeChains() {
	for _, c := range s.chains {
		if err := c.Close(); err != nil {
			s.log.Warn("closing transforms", "err", err.Error())
		}
	}
}

// run serves HTTP, connects, builds the pipeline and runs it until the
// first signal, and returns the exit code; abandoned reports that a second
// signal ended it without waiting for the open transaction, so the chains
// may still be in use.
func (s *startup) run(ctx context.Context, again <-chan struct{}) (code int, abandoned bool) {
	cfg, log, chains, sec, chain := s.cfg, s.log, s.chains, s.sec, s.chains[0]
	defer s.ln.Close() // for the early returns; the server's Shutdown closes it too

	// HTTP from the first moment: while the embedded broker starts or the
	// database is unreachable, /healthz says alive and /readyz not ready,
	// so a startup probe does not kill a processor that is only waiting.
	promReg := newRegistry()
	ep := newEndpoints(cfg, chain, len(chains))
	ep.token = s.token
	registerReady(promReg, ep.ready)
	srv := serveHTTP(s.ln, promReg, ep)
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
		return code, false
	}
	defer closeBroker()

	db, code, ok := openSink(ctx, s.dest, cfg, promReg, ep, log)
	if !ok {
		return code, false
	}
	if db != nil {
		defer db.close()
	}
	if s.sch != nil {
		stop, code, ok := s.openSchemas(ctx, ep)
		if !ok {
			return code, false
		}
		defer stop()
	}
	st, ts, closeStores, code, ok := s.openStores(ctx, ep, brokers, promReg)
	if !ok {
		return code, false
	}
	defer func() {
		if !abandoned { // the loop may still use them
			closeStores()
		}
	}()
	rp, closeHop, err := s.openHop(ctx, st != nil, brokers)
	if err != nil {
		return storeExit(err, log), false
	}
	defer closeHop()
	in, err := s.prep.build(brokers, promReg, reached{db: db, state: st, hop: rp, tables: ts})
	if err != nil {
		log.Error("building the processor", "err", err.Error())
		return exitRuntime, false
	}
	ep.run(in.Pipeline)

	s.logStart(brokers)

	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	select {
	case err = <-done:
		return exitCode(err, cfg, s.prep.required, in.Pipeline, log), false
	case <-again:
		log.Error("second signal: exiting without finishing the open transaction (it will be aborted)")
		return exitRuntime, true
	}
}

// openStores opens the state store of a stateful chain (nil without)
// and the tables of its join stages; closeAll closes both. Not ok, code
// is the exit code.
func (s *startup) openStores(ctx context.Context, ep *endpoints, brokers []string, promReg prometheus.Registerer) (
	st *state.Manager, ts *tables, closeAll func(), code int, ok bool) {
	cfg, log, chain := s.cfg, s.log, s.chains[0]
	if len(chain.Stores()) > 0 {
		ep.starting("opening the state store")
	}
	st, err := openState(ctx, cfg, s.sec, brokers, chain, promReg, log)
	if err != nil {
		return nil, nil, nil, storeExit(err, log), false
	}
	if len(chain.Joins()) > 0 {
		ep.starting("opening the tables")
	}
	ts, err = openTables(ctx, cfg, dialConn(cfg, s.sec, brokers), s.chains, s.sch.tableDecoder(ctx), promReg, log)
	if err != nil {
		if st != nil {
			_ = st.Close()
		}
		return nil, nil, nil, storeExit(err, log), false
	}
	return st, ts, func() {
		ts.close()
		if st != nil {
			_ = st.Close()
		}
	}, exitOK, true
}

// logStart logs the settings the processor starts with.
func (s *startup) logStart(brokers []string) {
	cfg := s.cfg
	s.log.Info("processor starting", append([]any{"version", version(), "guarantee", cfg.Guarantee,
		"sink", cfg.Sink, "brokers", strings.Join(brokers, ","), "group", cfg.Group, "input_topics", strings.Join(cfg.InputTopics, ","),
		"output_topic", cfg.OutputTopic, "transactional_id", cfg.TransactionalID, "client_id", cfg.ClientID, "transforms", strings.Join(cfg.Transforms, ","),
		"commit_interval", cfg.CommitInterval.String(), "max_records_per_txn", cfg.MaxRecordsPerTxn, "workers", len(s.chains),
		"ordering", cfg.Ordering, "ordered_chain", s.chains[0].Ordered(), "http_addr", cfg.HTTPAddr},
		append(s.sec.logAttrs(), s.sch.logAttrs()...)...)...)
}

// openHop opens the repartition hop of a stateful chain that needs one
// (nil without), adding its topic to the required topics; close releases
// it.
func (s *startup) openHop(ctx context.Context, stateful bool, brokers []string) (rp *pipeline.Repartition, close func(), err error) {
	if !stateful {
		return nil, func() {}, nil
	}
	rp, close, err = openRepartition(ctx, s.cfg, dialConn(s.cfg, s.sec, brokers), s.chains[0])
	if err != nil {
		return nil, nil, err
	}
	if rp != nil {
		s.prep.required[rp.Topic] = config.EnvName("GROUP") // its name's part the user sets
	}
	return rp, close, nil
}

// handleSignals returns a context that the first SIGINT or SIGTERM
// cancels, a channel that a second one closes (give up finishing the open
// transaction), and a function that stops listening.
func handleSignals() (ctx context.Context, again <-chan struct{}, stop func()) {
	ctx, stopFirst := interrupt.Context()
	second := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-quit:
			return
		}
		c := make(chan os.Signal, 1)
		signal.Notify(c, interrupt.Signals()...) // before stopFirst, so no signal goes unhandled
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

// connectBrokers returns the seed brokers, starting the embedded broker
// when configured (with SASL, as sec says), and how to stop it; with
// OAUTHBEARER it fetches the first token (checkOAuth). When it returns no
// brokers, code is the exit code.
func connectBrokers(ctx context.Context, cfg *config.Config, sec *security, log *slog.Logger) (brokers []string, closeBroker func(), code int) {
	if !cfg.EmbeddedBroker {
		if code, ok := checkOAuth(ctx, sec, log); !ok {
			return nil, nil, code
		}
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

// newLogger returns the logger cfg's PROCESSOR_LOG_LEVEL and
// PROCESSOR_LOG_FORMAT ask for, writing to stderr.
func newLogger(cfg *config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}
