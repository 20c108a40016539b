// Package metric builds the processor's Prometheus collectors: every
// metric is processor_<name>, with its help string, in one line each, so
// that the packages that own metrics (pipeline, txn, pgsink) declare
// names and help, not options structs. Names and help strings are public:
// dashboards and alerts read them.
package metric

import "github.com/prometheus/client_golang/prometheus"

// Namespace is the prefix of every metric name.
const Namespace = "processor"

// Counter returns the counter processor_<name>.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
}

// CounterVec returns the counter processor_<name> with labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

// Gauge returns the gauge processor_<name>.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
}

// GaugeVec returns the gauge processor_<name> with labels.
func GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

// GaugeFunc returns the gauge processor_<name> whose value f gives at
// each scrape.
func GaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, f)
}

// Histogram returns the histogram processor_<name> with buckets.
func Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets})
}
