package pgsink

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/internal/metric"
)

// The reasons of processor_postgres_rollbacks_total.
const (
	// RollbackFenced: an offset update found another instance's offset
	// (*sink.FencedError).
	RollbackFenced = "fenced"
	// RollbackRow: the database refused one row (*sink.RowError).
	RollbackRow = "row"
	// RollbackError: any other failure, the connection's included.
	RollbackError = "error"
)

// Metrics are the sink's metrics, named in the processor's style
// (namespace processor, subsystem postgres). One Metrics may serve several
// Sinks of a process.
type Metrics struct {
	// RoundTrip is processor_postgres_roundtrip_seconds: one observation
	// per database transaction of Commit, from BEGIN to COMMIT (or to the
	// ROLLBACK of a failed one).
	RoundTrip prometheus.Histogram
	// RowsWritten is processor_postgres_rows_written_total: output rows of
	// committed transactions (dead letters not included).
	RowsWritten prometheus.Counter
	// Commits is processor_postgres_commits_total.
	Commits prometheus.Counter
	// Rollbacks is processor_postgres_rollbacks_total{reason}, reason one
	// of RollbackFenced, RollbackRow, RollbackError: batches Commit did not
	// commit, including those refused before BEGIN (a value that is not
	// JSON for @value) or whose BEGIN failed (server down).
	Rollbacks *prometheus.CounterVec
	// SessionsEnded is processor_postgres_sessions_ended_total: sessions
	// of stopped instances that held a batch's partitions, ended by the
	// partitions' new owner (zombie.go).
	SessionsEnded prometheus.Counter
}

// NewMetrics creates the sink's metrics and registers them with reg; it
// panics if they are registered already, as prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		RoundTrip:     metric.Histogram("postgres_roundtrip_seconds", "Time of one PostgreSQL sink transaction, from BEGIN to COMMIT (or ROLLBACK): rows, dead letters and offsets.", []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}),
		RowsWritten:   metric.Counter("postgres_rows_written_total", "Output rows written to PostgreSQL by committed transactions."),
		Commits:       metric.Counter("postgres_commits_total", "PostgreSQL sink transactions committed: their rows and offsets became visible together."),
		SessionsEnded: metric.Counter("postgres_sessions_ended_total", "PostgreSQL sessions of stopped instances (frozen, paused, cut off) that held the row locks of a batch's partitions for longer than any commit may run, ended by the partitions' new owner."),
		Rollbacks:     metric.CounterVec("postgres_rollbacks_total", "PostgreSQL sink batches not committed, by reason: fenced (another instance moved an offset), row (a row was refused), error (anything else, an unreachable server and lost connections included).", "reason"),
	}
	for _, r := range []string{RollbackFenced, RollbackRow, RollbackError} {
		m.Rollbacks.WithLabelValues(r) // export zeros so that rate() works from the start
	}
	reg.MustRegister(m.RoundTrip, m.RowsWritten, m.Commits, m.Rollbacks, m.SessionsEnded)
	return m
}
