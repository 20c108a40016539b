package pipeline

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the record metrics named in CONVENTIONS.md. They count
// records of committed transactions only, so over any interval they show
// exactly-once progress: an aborted and retried input is counted once.
type Metrics struct {
	Consumed prometheus.Counter
	Produced *prometheus.CounterVec // {topic}
	Filtered prometheus.Counter
}

// NewMetrics creates the record metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Consumed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "records_consumed_total",
			Help: "Input records whose processing committed (their offsets were committed in a transaction).",
		}),
		Produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "processor", Name: "records_produced_total",
			Help: "Output records committed, by topic.",
		}, []string{"topic"}),
		Filtered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "records_filtered_total",
			Help: "Input records the transform chain turned into no output, in committed transactions.",
		}),
	}
	reg.MustRegister(m.Consumed, m.Produced, m.Filtered)
	return m
}
