package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/statuspage"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
)

// endpoints is what the HTTP handlers report on: the pipeline once it
// runs, and before that what the start waits for (the embedded broker,
// PostgreSQL), so that the endpoints answer from the first moment.
type endpoints struct {
	p     atomic.Pointer[pipeline.Pipeline]
	phase atomic.Pointer[string] // what the start waits for; nil once p is set

	// base is the /status of a processor that is starting: who it is,
	// not ready, healthy.
	base pipeline.Status
	// info is the rest of who it is, for /status and the page.
	info statuspage.Info
	// history is how far back the status history reaches; 0 for the
	// status page's default.
	history time.Duration
	// token guards / and /status (PROCESSOR_HTTP_TOKEN_FILE); nil: open.
	token *httpToken
	// pprof serves net/http/pprof under /debug/pprof/ (PROCESSOR_PPROF),
	// behind token.
	pprof bool
}

// newEndpoints returns the endpoints of a processor that is starting.
func newEndpoints(cfg *config.Config, chain *transform.Chain, workers int) *endpoints {
	ep := &endpoints{base: pipeline.Status{
		TransactionalID: cfg.TransactionalID, Group: cfg.Group, Guarantee: cfg.Guarantee, Sink: cfg.Sink,
		Workers: workers, Health: "ok", Aborts: map[string]uint64{}, Generation: -1,
	}}
	ep.info = statuspage.Info{Version: version(), StartedAt: time.Now(), InputTopics: cfg.InputTopics, OutputTopic: cfg.OutputTopic,
		Formats: formats(cfg)}
	if cfg.OnError == "dlq" {
		ep.info.DLQTopic = cfg.DLQTopic
	}
	ep.history = cfg.StatusHistory
	ep.pprof = cfg.Pprof
	for _, e := range chain.Entries() {
		ep.base.Chain = append(ep.base.Chain, e.String())
	}
	ep.starting("starting")
	return ep
}

// starting says what the start waits for now.
func (ep *endpoints) starting(what string) { ep.phase.Store(&what) }

// run hands the endpoints to p.
func (ep *endpoints) run(p *pipeline.Pipeline) {
	ep.p.Store(p)
	ep.phase.Store(nil)
}

// waiting is what the start waits for, "" once the pipeline runs.
func (ep *endpoints) waiting() string {
	if w := ep.phase.Load(); w != nil && ep.p.Load() == nil {
		return *w
	}
	return ""
}

// status is the pipeline's snapshot, or the starting processor's.
func (ep *endpoints) status() pipeline.Status {
	if p := ep.p.Load(); p != nil {
		return p.Status()
	}
	s := ep.base
	s.Aborts = map[string]uint64{}
	s.Starting = ep.waiting()
	return s
}

// healthy is nil while the processor is alive: starting, or running and
// not stuck (pipeline.Healthy).
func (ep *endpoints) healthy() error {
	if p := ep.p.Load(); p != nil {
		return p.Healthy()
	}
	return nil
}

// ready says why the processor is not ready, or "" when it is.
func (ep *endpoints) ready() string {
	p := ep.p.Load()
	switch {
	case p == nil:
		return ep.waiting()
	case !p.Ready():
		return "not yet joined the group with an initialised transactional producer"
	}
	return ""
}

// registerReady registers processor_ready, which reads ready at every
// scrape: 1 when it is "" (what /readyz answers 200 for), 0 otherwise.
func registerReady(reg prometheus.Registerer, ready func() string) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "processor",
		Name:      "ready",
		Help:      "1 while the instance is ready, as /readyz answers 200 (joined its group, producer initialised); 0 while it starts, waits for the brokers or the database, or has lost its group.",
	}, func() float64 {
		if ready() != "" {
			return 0
		}
		return 1
	}))
}

// serveHTTP serves the status page (/), /status, /metrics, /healthz and
// /readyz (and with ep.pprof /debug/pprof/) in the background, and samples the status history until the
// server shuts down. With ep.token, / and /status need its bearer token;
// the others stay open to scrapers and probes.
func serveHTTP(ln net.Listener, reg *prometheus.Registry, ep *endpoints) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	status := statuspage.New(ep.status, ep.history, ep.info)
	mux.HandleFunc("/status", ep.token.guard(status.Status))
	mux.HandleFunc("/", ep.token.guard(status.Page))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ep.healthy(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if what := ep.waiting(); what != "" {
			fmt.Fprintln(w, "ok (starting: "+what+")")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := ep.ready(); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if ep.pprof {
		servePprof(mux, ep.token)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stopSampling := context.WithCancel(context.Background())
	srv.RegisterOnShutdown(stopSampling)
	go status.Sample(ctx)
	go func() { _ = srv.Serve(ln) }()
	return srv
}

// servePprof adds Go's profiles (net/http/pprof) under /debug/pprof/ to
// mux, each behind token: the CPU profile of a running processor, its
// heap, goroutines and the rest, for `go tool pprof`.
func servePprof(mux *http.ServeMux, token *httpToken) {
	mux.HandleFunc("/debug/pprof/", token.guard(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", token.guard(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", token.guard(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", token.guard(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", token.guard(pprof.Trace))
}
