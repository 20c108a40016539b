package app

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// What the pipeline refuses before anything connects (pipeline.Check) is
// a one-line configuration error naming the variable to change, the same
// from Prepare, which Main and the integration tests build through, and
// from `processor try`, which builds the loop with pipeline.New (exit 2).
func TestPrepareRefusesWhatThePipelineRefuses(t *testing.T) {
	base := map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in,in2", "OUTPUT_TOPIC": "out",
		"TRANSACTIONAL_ID": "tx", "TRANSACTION_TIMEOUT": "10s", "SESSION_TIMEOUT": "12s"}
	for _, c := range []struct {
		name    string
		env     map[string]string
		wantVar string
		want    string
	}{
		{"route to an input", map[string]string{"TRANSFORMS": "route", "ROUTE_HEADER": "dest", "ROUTE_DEFAULT": "in2"},
			"ROUTE_DEFAULT", "the processor would consume its own output forever"},
		{"route to the dead letters", map[string]string{"TRANSFORMS": "route", "ROUTE_HEADER": "dest", "ROUTE_DEFAULT": "dlq",
			"ON_ERROR": "dlq", "DLQ_TOPIC": "dlq"}, "ROUTE_DEFAULT", "outputs would be mixed into the dead letters"},
		{"an attempt past the budget", map[string]string{"TRANSFORM_TIMEOUT": "9s"},
			"TRANSFORM_TIMEOUT", "fit four fifths of PROCESSOR_TRANSACTION_TIMEOUT (8s)"},
		{"retries past the budget", map[string]string{"TRANSFORM_TIMEOUT": "0s", "MAX_RETRIES": "100"},
			"MAX_RETRIES", "fit four fifths of PROCESSOR_TRANSACTION_TIMEOUT (8s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(config.EnvName(k), v)
			}
			for k, v := range c.env {
				t.Setenv(config.EnvName(k), v)
			}
			cfg, err := config.Load("h")
			if err != nil {
				t.Fatal(err)
			}
			chains, err := buildChains(transform.Default, cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer chains[0].Close()
			_, err = Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{})
			var cerr *settings.Error
			if !errors.As(err, &cerr) || cerr.Var != config.EnvName(c.wantVar) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Prepare = %v, want a *settings.Error of %s saying %q", err, config.EnvName(c.wantVar), c.want)
			}
			_, stderr, code := tryRun(t, transform.Default, nil, "k\tv\n")
			if code != exitConfig || !strings.Contains(stderr, config.EnvName(c.wantVar)+"=") || !strings.Contains(stderr, c.want) ||
				strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("processor try: exit %d, stderr %q; want exit 2 and one line naming %s saying %q", code, stderr, config.EnvName(c.wantVar), c.want)
			}
		})
	}
}

// A database sink writes dead letters to a table its destination names
// once it is open: Prepare, before anything connects, must take
// PROCESSOR_ON_ERROR=dlq without PROCESSOR_DLQ_TOPIC.
func TestPrepareDatabaseSinkDeadLetters(t *testing.T) {
	for k, v := range map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "SINK": "postgres",
		"POSTGRES_URL": "postgres://u@127.0.0.1:1/db", "TRANSACTIONAL_ID": "tx", "ON_ERROR": "dlq"} {
		t.Setenv(config.EnvName(k), v)
	}
	cfg, err := config.Load("h")
	if err != nil {
		t.Fatal(err)
	}
	chains, err := buildChains(transform.Default, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer chains[0].Close()
	if _, err := Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{}); err != nil {
		t.Fatalf("Prepare with PROCESSOR_SINK=postgres and PROCESSOR_ON_ERROR=dlq: %v", err)
	}
}
