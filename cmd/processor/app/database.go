package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pgsink"
)

// openDatabase opens the postgres sink's database (PROCESSOR_SINK=postgres),
// creating its tables, and registers its metrics with promReg; nil without
// the postgres sink. A setting that cannot work (the URL, a table name, the
// statement, the password file) is a *config.Error,
// returned at once, and so is a server that refuses the user, the password
// or the database. A database that cannot be reached is retried with
// backoff, saying so, until ctx ends.
func openDatabase(ctx context.Context, cfg *config.Config, promReg prometheus.Registerer, log *slog.Logger) (*pgsink.Sink, error) {
	if cfg.Sink != "postgres" {
		return nil, nil
	}
	o := pgsink.Options{
		URL:             cfg.PostgresURL.Reveal(),
		Table:           cfg.PostgresTable,
		Statement:       cfg.PostgresStatement,
		DeadLetterTable: cfg.PostgresDeadLetterTable,
		Group:           cfg.Group,
		Logger:          log,
		Metrics:         pgsink.NewMetrics(promReg),
	}
	if f := cfg.PostgresPasswordFile; f != "" {
		pw, err := readPassword("POSTGRES_PASSWORD_FILE", f, "the database password")
		if err != nil {
			return nil, err
		}
		o.Password = pw
	}
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		db, err := pgsink.Open(octx, o)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("connected to PostgreSQL")
			}
			return db, nil
		}
		var ce *pgsink.ConfigError
		if errors.As(err, &ce) {
			return nil, &config.Error{Var: sinkVar("postgres", ce.Setting), Value: ce.Value, Want: ce.Want}
		}
		var refused *pgsink.RefusedError
		if errors.As(err, &refused) || ctx.Err() != nil {
			return nil, err
		}
		log.Warn("cannot open the PostgreSQL database; retrying", "attempt", attempt, "retry_in", backoff.String(), "err", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// sinkVar is the variable a setting of sink name is read from:
// PROCESSOR_<NAME>_<SETTING>.
func sinkVar(name, setting string) string {
	return config.EnvName(strings.ToUpper(name) + "_" + setting)
}

// postgresNames are the names the pipeline gives the postgres sink's
// destinations, where the Kafka sink has topics: the records table (or
// the statement) and the dead-letter table. They label
// processor_records_produced_total.
func postgresNames(cfg *config.Config) (out, deadLetters string) {
	out = "postgres:" + cfg.PostgresTable
	if cfg.PostgresStatement != "" {
		out = "postgres:statement"
	}
	return out, "postgres:" + cfg.PostgresDeadLetterTable
}
