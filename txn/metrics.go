package txn

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the transaction metrics named in CONVENTIONS.md. One Metrics
// serves every Session of a process, across rebuilds.
type Metrics struct {
	Committed prometheus.Counter
	Aborted   *prometheus.CounterVec // {reason}
	Duration  prometheus.Histogram
	Records   prometheus.Histogram
	Rebalance prometheus.Counter
	Fenced    prometheus.Counter
}

// NewMetrics creates the transaction metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Committed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "transactions_committed_total",
			Help: "Transactions committed: their output records and consumed offsets became visible together.",
		}),
		Aborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "processor", Name: "transactions_aborted_total",
			Help: "Transactions aborted, by reason; their input records are processed again.",
		}, []string{"reason"}),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "processor", Name: "transaction_duration_seconds",
			Help:    "Time from beginning a transaction to its commit or abort.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		Records: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "processor", Name: "transaction_records",
			Help:    "Input records per transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1 .. 262144
		}),
		Rebalance: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "rebalances_total",
			Help: "Group rebalances that changed this instance's assignment or membership.",
		}),
		Fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "producer_fenced_total",
			Help: "Times this instance's transactional producer was fenced by a newer one with the same transactional ID.",
		}),
	}
	for _, r := range []Reason{ReasonRebalance, ReasonOffsetCommit, ReasonProduce, ReasonTransform, ReasonFenced, ReasonEndError, ReasonWatchdog, ReasonTimeout} {
		m.Aborted.WithLabelValues(string(r)) // export zeros so rate() works from the start
	}
	reg.MustRegister(m.Committed, m.Aborted, m.Duration, m.Records, m.Rebalance, m.Fenced)
	return m
}
