package txn

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/internal/metric"
)

// Metrics are the transaction metrics, processor_transaction*,
// processor_rebalances_total, processor_producer_fenced_total and
// processor_last_commit_timestamp_seconds; their names and help strings
// are public (dashboards and alerts use them). One Metrics serves every
// Session of a process, across rebuilds.
type Metrics struct {
	Committed prometheus.Counter
	Aborted   *prometheus.CounterVec // {reason}
	Duration  prometheus.Histogram
	Records   prometheus.Histogram
	Rebalance prometheus.Counter
	Fenced    prometheus.Counter
	// LastCommit is processor_last_commit_timestamp_seconds.
	LastCommit prometheus.Gauge

	// What a status page reads without scraping: when the open
	// transaction began (unix nanoseconds, 0 when none is open; it is also
	// processor_transaction_open_age_seconds), the aborts by reason, and
	// the last one.
	openSince  atomic.Int64
	lastCommit atomic.Int64 // unix nanoseconds
	aborts     sync.Map     // Reason -> *atomic.Uint64
	lastAbort  atomic.Pointer[Abort]
}

// Abort is one aborted transaction.
type Abort struct {
	At     time.Time
	Reason Reason
	Detail string // the error, when there was one
}

// allReasons are the abort reasons, for exporting zeros.
var allReasons = []Reason{ReasonRebalance, ReasonOffsetCommit, ReasonProduce, ReasonTransform, ReasonFenced, ReasonEndError, ReasonWatchdog, ReasonTimeout, ReasonUnavailable}

// countAbort counts an aborted transaction.
func (m *Metrics) countAbort(reason Reason, detail string) {
	m.Aborted.WithLabelValues(string(reason)).Inc()
	n, _ := m.aborts.LoadOrStore(reason, new(atomic.Uint64))
	n.(*atomic.Uint64).Add(1)
	m.lastAbort.Store(&Abort{At: time.Now(), Reason: reason, Detail: detail})
}

// Aborts returns the aborted transactions so far by reason, and the last
// one (nil if none). Safe from any goroutine.
func (m *Metrics) Aborts() (map[Reason]uint64, *Abort) {
	out := map[Reason]uint64{}
	m.aborts.Range(func(k, v any) bool {
		out[k.(Reason)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out, m.lastAbort.Load()
}

// LastCommitAt returns when a transaction last committed, or the zero
// time. Safe from any goroutine.
func (m *Metrics) LastCommitAt() time.Time {
	if n := m.lastCommit.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// OpenSince returns when the open transaction began, or the zero time
// when none is open. Safe from any goroutine.
func (m *Metrics) OpenSince() time.Time {
	if n := m.openSince.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// NewMetrics creates the transaction metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Committed:  metric.Counter("transactions_committed_total", "Transactions committed: their output records and consumed offsets became visible together."),
		Aborted:    metric.CounterVec("transactions_aborted_total", "Transactions aborted, by reason; their input records are processed again.", "reason"),
		Duration:   metric.Histogram("transaction_duration_seconds", "Time from beginning a transaction to its commit or abort.", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}),
		Records:    metric.Histogram("transaction_records", "Input records per transaction.", prometheus.ExponentialBuckets(1, 4, 10)), // 1 .. 262144
		Rebalance:  metric.Counter("rebalances_total", "Group rebalances that changed this instance's assignment or membership."),
		Fenced:     metric.Counter("producer_fenced_total", "Times this instance's transactional producer was fenced by a newer one with the same transactional ID."),
		LastCommit: metric.Gauge("last_commit_timestamp_seconds", "When a transaction last committed, in unix seconds; 0 before the first commit."),
	}
	openAge := metric.GaugeFunc("transaction_open_age_seconds", "How long the open transaction has been open; 0 when none is. Near the transaction timeout, the broker is about to abort it.", func() float64 {
		if since := m.OpenSince(); !since.IsZero() {
			return time.Since(since).Seconds()
		}
		return 0
	})
	for _, r := range allReasons {
		m.Aborted.WithLabelValues(string(r)) // export zeros so rate() works from the start
	}
	reg.MustRegister(m.Committed, m.Aborted, m.Duration, m.Records, m.Rebalance, m.Fenced, m.LastCommit, openAge)
	return m
}
