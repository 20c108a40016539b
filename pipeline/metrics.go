package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/internal/metric"
)

// Metrics are the record metrics, processor_records_*, processor_transform_*
// and the per-partition offset and lag gauges; their names and help
// strings are public (dashboards and alerts use them). The counters count
// records of committed transactions only, so over any interval they show
// exactly-once progress: an aborted and retried input is counted once.
type Metrics struct {
	Consumed prometheus.Counter
	Produced *prometheus.CounterVec // {topic}
	Filtered prometheus.Counter
	DLQ      prometheus.Counter
	Skipped  prometheus.Counter
	// Crashed counts the records the process died on (see crash.go),
	// failed under the error policy without running again.
	Crashed prometheus.Counter
	// Future counts the records stamped further ahead of the wall clock
	// than MaxFutureSkew (see streamtime.go).
	Future prometheus.Counter
	// Late counts the records stateful stages found late, by store
	// (late.go).
	Late *prometheus.CounterVec

	// TransformErrors and Retries count attempts as they happen, aborted
	// transactions included.
	TransformErrors *prometheus.CounterVec // {transform,class}
	Retries         prometheus.Counter

	// Per assigned partition {topic,partition}: where it stands. A revoked
	// partition's series are deleted.
	ConsumerLag      *prometheus.GaugeVec // last stable offset minus committed offset
	CommittedOffset  *prometheus.GaugeVec
	LogEndOffset     *prometheus.GaugeVec
	LastStableOffset *prometheus.GaugeVec
	UnstableRecords  *prometheus.GaugeVec // log end minus last stable offset
	// LagSeconds is how long ago the first record not yet committed was
	// written (see partitions).
	LagSeconds *prometheus.GaugeVec

	// EndToEndLatency is, per committed input record, from its timestamp
	// to the commit that made its outputs visible (see latency.go).
	EndToEndLatency *metric.BatchHistogram
}

// LatencyBuckets are processor_end_to_end_latency_seconds' buckets: 1 ms
// to 10 minutes.
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// NewMetrics creates the record metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Consumed: metric.Counter("records_consumed_total", "Input records whose processing committed (their offsets were committed in a transaction)."),
		Produced: metric.CounterVec("records_produced_total", "Output records committed, by topic.", "topic"),
		Filtered: metric.Counter("records_filtered_total", "Input records the transform chain turned into no output, in committed transactions."),
		DLQ:      metric.Counter("records_dlq_total", "Input records written to the dead-letter topic, in committed transactions."),
		Skipped:  metric.Counter("records_skipped_total", "Input records that failed and were dropped under the skip error policy, in committed transactions."),
		Crashed: metric.Counter("records_crashed_total", "Input records the process died on as many times in their batch as the crash attempts allow and once more alone, "+
			"then failed under the error policy (dead-lettered or skipped) without running again, in committed transactions; they are in processor_records_dlq_total or processor_records_skipped_total too."),
		Future: metric.Counter("records_future_total", "Input records of a stateful chain stamped further ahead of the wall clock than the maximum future skew, in committed transactions: "+
			"they moved their partition's stream time only to the wall clock plus that skew."),
		Late: metric.CounterVec("records_late_total", "Input records a stateful stage found late, by its store, in committed transactions: they came after their window closed (end plus grace by stream time), "+
			"or, for dedupe, further behind stream time than its grace. Written to the late topic when one is set; otherwise a window drops them and dedupe passes them.", "store"),
		TransformErrors: metric.CounterVec("transform_errors_total", "Transform failures on a record, by chain entry and class (permanent, retriable, timeout, panic, unavailable: a service the chain depends on failed, not the record).", "transform", "class"),
		Retries:         metric.Counter("transform_retries_total", "Retries of records whose transform failed with a retriable error or timed out."),
	}
	partition := func(name, help string) *prometheus.GaugeVec { return metric.GaugeVec(name, help, "topic", "partition") }
	m.ConsumerLag = partition("consumer_lag_records",
		"Records of an assigned input partition that a read_committed reader could read and the group has not committed: last stable offset minus committed offset (0 when caught up, transaction markers included).")
	m.CommittedOffset = partition("committed_offset", "The next offset the group has committed for an assigned input partition.")
	m.LogEndOffset = partition("log_end_offset", "The log-end offset (high watermark) of an assigned input partition.")
	m.LastStableOffset = partition("last_stable_offset", "The last stable offset of an assigned input partition: read_committed readers read up to it.")
	m.UnstableRecords = partition("partition_unstable_records",
		"Log-end minus last stable offset of an assigned input partition: records of upstream transactions not yet decided; one left open shows here first.")
	m.LagSeconds = partition("consumer_lag_seconds",
		"How long ago the first record of an assigned input partition that the group has not committed was written, by its timestamp (0 when caught up). "+
			"It is the first such record the processor has fetched; after a commit that leaves lag it keeps the last known one until the next poll brings the next; 0 while none is known.")
	m.EndToEndLatency = metric.NewBatchHistogram("end_to_end_latency_seconds",
		"From an input record's timestamp to the commit that made its outputs visible (the database commit into PostgreSQL), for every committed input record, "+
			"filtered, skipped and dead-lettered ones included; an aborted attempt is not observed, its retry is once committed. "+
			"Records without a timestamp (0 or below) are not observed; a timestamp in the future counts as 0.", LatencyBuckets)
	reg.MustRegister(m.Consumed, m.Produced, m.Filtered, m.DLQ, m.Skipped, m.Crashed, m.Future, m.Late, m.TransformErrors, m.Retries,
		m.ConsumerLag, m.CommittedOffset, m.LogEndOffset, m.LastStableOffset, m.UnstableRecords,
		m.LagSeconds, m.EndToEndLatency)
	return m
}
