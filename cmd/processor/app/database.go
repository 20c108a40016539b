package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/backoff"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/sink"
)

// The destinations other than Kafka: PROCESSOR_SINK names one registered
// in a sink.Registry (the built-in ones register from init, see
// sinks.go), whose settings are read from PROCESSOR_<NAME>_<SETTING>.

// destination is the sink PROCESSOR_SINK names, with its filled settings.
type destination struct {
	name     string
	spec     sink.Spec
	settings any
}

// opened is an open destination, as the pipeline is built on it.
type opened struct {
	dest                 sink.Transactional
	name                 string
	outputs, deadLetters string // what the pipeline calls its destinations
	close                func()
}

// sinkVar is the variable a setting of sink name is read from:
// PROCESSOR_<NAME>_<SETTING>.
func sinkVar(name, setting string) string {
	return PluginVar(sinkPlugin(name), setting)
}

// sinkPlugin names the sink called name as a plugin.
func sinkPlugin(name string) settings.Plugin { return settings.Plugin{Kind: "sink", Name: name} }

// chooseSink returns the sink of PROCESSOR_SINK with its settings filled
// from the environment, or nil for kafka. A setting that cannot work is a
// *settings.Error naming its variable, and so is a required setting of a
// sink that is not the one chosen (a leftover that would be ignored).
func chooseSink(reg *sink.Registry, cfg *config.Config) (*destination, error) {
	for _, name := range reg.Names() {
		if name == cfg.Sink {
			continue
		}
		spec, _ := reg.Lookup(name)
		env := config.Env(func(setting string) string { return sinkVar(name, setting) })
		for _, f := range spec.Fields() {
			if v, _ := env(f.Name); f.Required && v != "" {
				return nil, &settings.Error{Var: sinkVar(name, f.Name), Value: v, Secret: f.Secret,
					Want: settings.Say("unset unless " + config.EnvName("SINK") + "=" + name)}
			}
		}
	}
	if cfg.Sink == "kafka" {
		return nil, nil
	}
	spec, ok := reg.Lookup(cfg.Sink)
	if !ok {
		return nil, &settings.Error{Var: config.EnvName("SINK"), Value: cfg.Sink, Want: settings.Say(sinkChoices(reg))}
	}
	d := &destination{name: cfg.Sink, spec: spec}
	if spec.Settings == nil {
		return d, nil
	}
	d.settings = spec.Settings()
	env := config.Env(func(setting string) string { return sinkVar(cfg.Sink, setting) })
	err := settings.Fill(spec.Fields(), d.settings, func(setting string) (string, bool) {
		v, ok := env(setting)
		return v, ok && v != ""
	})
	return d, d.settingError(err)
}

// sinkChoices are the values of PROCESSOR_SINK: kafka or a sink of reg,
// e.g. "kafka or postgres".
func sinkChoices(reg *sink.Registry) string {
	return strings.Join(append([]string{"kafka"}, reg.Names()...), " or ")
}

// sinkSetting is PROCESSOR_SINK's entry of the configuration reference,
// s, with its values and what each does from reg: config describes kafka
// and sinks in general, the registry names them.
func sinkSetting(reg *sink.Registry, s setting) setting {
	s.Form = sinkChoices(reg)
	for _, name := range reg.Names() {
		spec, _ := reg.Lookup(name)
		s.Doc += "; " + name + ": " + spec.Doc
	}
	return s
}

// settingError turns a *settings.Error of the sink's into the
// configuration error naming its variable; other errors are returned as
// they are.
func (d *destination) settingError(err error) error {
	var se *settings.Error
	if !errors.As(err, &se) {
		return err
	}
	se.Plugin = sinkPlugin(d.name)
	ce := varError(se)
	if se.Unset {
		ce.Want = append(ce.Want, settings.Say(" ("+config.EnvName("SINK")+"="+d.name+" needs one)")...)
	}
	return ce
}

// open opens the destination (creating its tables, for the postgres
// sink) and registers its metrics with promReg. A setting that cannot
// work is a *settings.Error, returned at once, and so is a destination that
// refuses the user, the password or the database. One that cannot be
// reached is retried with backoff, saying so, until ctx ends.
func (d *destination) open(ctx context.Context, group string, promReg prometheus.Registerer, log *slog.Logger) (*opened, error) {
	register := collectorRegister(promReg)
	host := sink.Host{Group: group, Logger: log, Register: func(c any) error {
		err := register(c)
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) { // an earlier attempt's: the latest attempt's count
			promReg.Unregister(dup.ExistingCollector)
			err = register(c)
		}
		return err
	}}
	wait := backoff.New(startBackoff())
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		dest, closeDest, err := d.spec.Open(octx, d.settings, host)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("connected to " + d.spec.Title)
			}
			out, dead := d.spec.Names(d.settings)
			return &opened{dest: dest, name: d.name, outputs: out, deadLetters: dead, close: closeDest}, nil
		}
		var se *settings.Error
		var refused *sink.RefusedError
		switch {
		case errors.As(err, &se):
			return nil, d.settingError(err)
		case errors.As(err, &refused) || ctx.Err() != nil:
			return nil, err
		}
		retryIn := wait.Next()
		log.Warn("cannot open the "+d.spec.Title+" database; retrying", "attempt", attempt, "retry_in", retryIn.String(), "err", err.Error())
		if err := backoff.Sleep(ctx, retryIn); err != nil {
			return nil, err
		}
	}
}

// collectorRegister is sink.Host.Register (and the argument of
// sink.Spec.Metrics) for reg: it registers a prometheus.Collector.
func collectorRegister(reg prometheus.Registerer) func(collector any) error {
	return func(c any) error {
		pc, ok := c.(prometheus.Collector)
		if !ok {
			return fmt.Errorf("a %T is no prometheus.Collector", c)
		}
		return reg.Register(pc)
	}
}

// startBackoff bounds the waits between attempts to reach a database or
// the Schema Registry at start: below 500ms before the first retry, the
// bound doubling to 10s, each wait drawn at random below it (full jitter:
// instances restarted together do not retry together).
func startBackoff() backoff.Policy {
	return backoff.Policy{Base: 500 * time.Millisecond, Cap: 10 * time.Second}
}

// OpenSink is a destination that a caller of Prepared.Build opened itself
// (an integration test's PostgreSQL sink): the sink.Transactional, what the
// pipeline calls its outputs and dead letters where Kafka has topics
// (they label processor_records_produced_total), and how it closes.
type OpenSink interface {
	sink.Transactional
	Names() (outputs, deadLetters string)
	Close()
}

// openedBy is db, the destination of cfg.Sink that a caller of
// Prepared.Build opened, as the pipeline is built on it; nil for the kafka
// sink, whatever db is.
func openedBy(cfg *config.Config, db OpenSink) *opened {
	if db == nil || cfg.Sink == "kafka" {
		return nil
	}
	out, dead := db.Names()
	return &opened{dest: db, name: cfg.Sink, outputs: out, deadLetters: dead, close: db.Close}
}

// openSink opens dest (nil: the kafka sink, nothing to open), saying so on
// the status page meanwhile. When it returns !ok, code is the exit code:
// 0 when ctx ended first, 2 for a configuration error.
func openSink(ctx context.Context, dest *destination, cfg *config.Config, promReg prometheus.Registerer, ep *endpoints, log *slog.Logger) (db *opened, code int, ok bool) {
	if dest == nil {
		return nil, exitOK, true
	}
	ep.starting("connecting to " + dest.spec.Title)
	db, err := dest.open(ctx, cfg.Group, promReg, log)
	switch {
	case err != nil && ctx.Err() != nil:
		log.Info("stopped while starting")
		return nil, exitOK, false
	case err != nil:
		return nil, configError(err), false
	}
	return db, exitOK, true
}
