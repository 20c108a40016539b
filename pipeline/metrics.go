package pipeline

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the record metrics named in CONVENTIONS.md. They count
// records of committed transactions only, so over any interval they show
// exactly-once progress: an aborted and retried input is counted once.
type Metrics struct {
	Consumed prometheus.Counter
	Produced *prometheus.CounterVec // {topic}
	Filtered prometheus.Counter
	DLQ      prometheus.Counter
	Skipped  prometheus.Counter

	// TransformErrors and Retries count attempts as they happen, aborted
	// transactions included.
	TransformErrors *prometheus.CounterVec // {transform,class}
	Retries         prometheus.Counter
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
		DLQ: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "records_dlq_total",
			Help: "Input records written to the dead-letter topic, in committed transactions.",
		}),
		Skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "records_skipped_total",
			Help: "Input records that failed and were dropped (PROCESSOR_ON_ERROR=skip), in committed transactions.",
		}),
		TransformErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "processor", Name: "transform_errors_total",
			Help: "Transform failures on a record, by chain entry and class (permanent, retriable, timeout, panic).",
		}, []string{"transform", "class"}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "processor", Name: "transform_retries_total",
			Help: "Retries of records whose transform failed with a retriable error or timed out.",
		}),
	}
	reg.MustRegister(m.Consumed, m.Produced, m.Filtered, m.DLQ, m.Skipped, m.TransformErrors, m.Retries)
	return m
}
