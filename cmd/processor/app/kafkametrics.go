package app

import (
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// kafkaMetrics is the franz-go hook that exports the Kafka client's metrics
// (processor_kafka_*) through kprom, giving every client its own
// kprom.Metrics. A kprom.Metrics serves one client: its OnNewClient
// replaces its collectors without a lock, while a closed client's hooks
// may still run (franz-go calls some on goroutines it does not wait for).
// A txn.Session builds a new client with the same hooks whenever it
// recovers, so one shared kprom.Metrics would race.
//
// The client hooks go to the metrics of the client they name; the broker
// and batch hooks, which do not name one, go to the newest client's. A late
// call from a closed client is therefore counted for its successor.
//
// Every kprom.Metrics has the request-latency histograms of
// kafkaHistograms, and registers through kpromRegistry, which gives two
// gauges names that promtool check metrics accepts and leaves out what
// kprom would never fill.
type kafkaMetrics struct {
	reg kprom.RegistererGatherer
	cur atomic.Pointer[kprom.Metrics] // the newest client's; nil before the first

	mu       sync.Mutex
	byClient map[*kgo.Client]*kprom.Metrics
}

// newKafkaMetrics returns the hook that registers the Kafka client's
// metrics with reg while a client is open.
func newKafkaMetrics(reg kprom.RegistererGatherer) *kafkaMetrics {
	return &kafkaMetrics{reg: reg, byClient: make(map[*kgo.Client]*kprom.Metrics)}
}

var ( // the hooks kprom implements; TestKafkaMetricsHooks checks none is missing
	_ kgo.HookNewClient           = (*kafkaMetrics)(nil)
	_ kgo.HookClientClosed        = (*kafkaMetrics)(nil)
	_ kgo.HookBrokerConnect       = (*kafkaMetrics)(nil)
	_ kgo.HookBrokerDisconnect    = (*kafkaMetrics)(nil)
	_ kgo.HookBrokerWrite         = (*kafkaMetrics)(nil)
	_ kgo.HookBrokerRead          = (*kafkaMetrics)(nil)
	_ kgo.HookBrokerE2E           = (*kafkaMetrics)(nil)
	_ kgo.HookBrokerThrottle      = (*kafkaMetrics)(nil)
	_ kgo.HookProduceBatchWritten = (*kafkaMetrics)(nil)
	_ kgo.HookFetchBatchRead      = (*kafkaMetrics)(nil)
)

// OnNewClient registers a new client's metrics, then routes the broker
// hooks to them.
func (k *kafkaMetrics) OnNewClient(cl *kgo.Client) {
	m := kprom.NewMetrics("processor", kprom.Registry(kpromRegistry{k.reg}), kprom.Subsystem("kafka"),
		kprom.Histograms(kafkaHistograms...))
	m.OnNewClient(cl)
	k.mu.Lock()
	k.byClient[cl] = m
	k.mu.Unlock()
	k.cur.Store(m)
}

// OnClientClosed unregisters the closed client's metrics.
func (k *kafkaMetrics) OnClientClosed(cl *kgo.Client) {
	k.mu.Lock()
	m := k.byClient[cl]
	delete(k.byClient, cl)
	k.mu.Unlock()
	if m != nil {
		m.OnClientClosed(cl)
	}
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (k *kafkaMetrics) OnBrokerConnect(meta kgo.BrokerMetadata, dialDur time.Duration, conn net.Conn, err error) {
	if m := k.cur.Load(); m != nil {
		m.OnBrokerConnect(meta, dialDur, conn, err)
	}
}

// OnBrokerDisconnect implements kgo.HookBrokerDisconnect.
func (k *kafkaMetrics) OnBrokerDisconnect(meta kgo.BrokerMetadata, conn net.Conn) {
	if m := k.cur.Load(); m != nil {
		m.OnBrokerDisconnect(meta, conn)
	}
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (k *kafkaMetrics) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, bytesWritten int, writeWait, timeToWrite time.Duration, err error) {
	if m := k.cur.Load(); m != nil {
		m.OnBrokerWrite(meta, key, bytesWritten, writeWait, timeToWrite, err)
	}
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (k *kafkaMetrics) OnBrokerRead(meta kgo.BrokerMetadata, key int16, bytesRead int, readWait, timeToRead time.Duration, err error) {
	if m := k.cur.Load(); m != nil {
		m.OnBrokerRead(meta, key, bytesRead, readWait, timeToRead, err)
	}
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (k *kafkaMetrics) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if m := k.cur.Load(); m != nil {
		m.OnBrokerE2E(meta, key, e2e)
	}
}

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (k *kafkaMetrics) OnBrokerThrottle(meta kgo.BrokerMetadata, throttleInterval time.Duration, throttledAfterResponse bool) {
	if m := k.cur.Load(); m != nil {
		m.OnBrokerThrottle(meta, throttleInterval, throttledAfterResponse)
	}
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten.
func (k *kafkaMetrics) OnProduceBatchWritten(meta kgo.BrokerMetadata, topic string, partition int32, metrics kgo.ProduceBatchMetrics) {
	if m := k.cur.Load(); m != nil {
		m.OnProduceBatchWritten(meta, topic, partition, metrics)
	}
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead.
func (k *kafkaMetrics) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, partition int32, metrics kgo.FetchBatchMetrics) {
	if m := k.cur.Load(); m != nil {
		m.OnFetchBatchRead(meta, topic, partition, metrics)
	}
}

// kafkaHistograms are the kprom histograms exported, all by broker
// (node_id) only: the time to write a request and to read its response,
// a request's whole round trip (request_duration_e2e, which for a fetch
// includes the broker's wait for data, up to the fetch max wait), and
// throttling by broker quotas.
var kafkaHistograms = []kprom.Histogram{kprom.WriteTime, kprom.ReadTime, kprom.RequestDurationE2E, kprom.RequestThrottled}

// kafkaRenamed are kprom gauges whose names end in _total, which
// Prometheus reserves for counters (promtool check metrics says so): they
// are exported under these names instead.
var kafkaRenamed = map[string]string{
	"processor_kafka_buffered_produce_records_total": "processor_kafka_buffered_produce_records",
	"processor_kafka_buffered_fetch_records_total":   "processor_kafka_buffered_fetch_records",
}

// kafkaDropped are kprom families that the options above never fill: the
// histograms not in kafkaHistograms, and the fetch and produce details
// beyond kprom's default (uncompressed bytes by node and topic). They are
// not registered, so that the metrics reference lists only what can be
// exported.
var kafkaDropped = map[string]bool{
	"processor_kafka_write_wait_seconds":             true,
	"processor_kafka_read_wait_seconds":              true,
	"processor_kafka_produce_compressed_bytes_total": true,
	"processor_kafka_produce_batches_total":          true,
	"processor_kafka_produce_records_total":          true,
	"processor_kafka_fetch_compressed_bytes_total":   true,
	"processor_kafka_fetch_batches_total":            true,
	"processor_kafka_fetch_records_total":            true,
}

// kpromRegistry is the registry kprom registers a client's collectors
// with: it renames the kafkaRenamed gauges and leaves out the
// kafkaDropped families.
type kpromRegistry struct{ kprom.RegistererGatherer }

// kpromCollector is what stands for c in the registry, nil for none.
func kpromCollector(c prometheus.Collector) prometheus.Collector {
	name := collectorName(c)
	if kafkaDropped[name] {
		return nil
	}
	if to, ok := kafkaRenamed[name]; ok {
		return &renamedGauge{from: c, desc: prometheus.NewDesc(to, collectorHelp(c), nil, nil)}
	}
	return c
}

func (r kpromRegistry) Register(c prometheus.Collector) error {
	if c = kpromCollector(c); c == nil {
		return nil
	}
	return r.RegistererGatherer.Register(c)
}

func (r kpromRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r kpromRegistry) Unregister(c prometheus.Collector) bool {
	if c = kpromCollector(c); c == nil {
		return true
	}
	return r.RegistererGatherer.Unregister(c) // by its description: a new renamedGauge does
}

// renamedGauge exports the value of a gauge collector, which has no
// labels, under another name.
type renamedGauge struct {
	from prometheus.Collector
	desc *prometheus.Desc
}

func (g *renamedGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *renamedGauge) Collect(ch chan<- prometheus.Metric) {
	ms := make(chan prometheus.Metric, 1)
	go func() {
		g.from.Collect(ms)
		close(ms)
	}()
	for m := range ms {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			ch <- prometheus.NewInvalidMetric(g.desc, err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, pb.GetGauge().GetValue())
	}
}

// kpromDescRE reads the name and help of a Desc's String.
var kpromDescRE = regexp.MustCompile(`^Desc\{fqName: "([^"\\]*)", help: "([^"\\]*)"`)

// collectorName and collectorHelp are those of the first family c
// describes; kprom's collectors describe one each.
func collectorName(c prometheus.Collector) string { return describeFirst(c)[1] }
func collectorHelp(c prometheus.Collector) string { return describeFirst(c)[2] }

func describeFirst(c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc, 1)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	m := []string{"", "", ""}
	for d := range ch {
		if got := kpromDescRE.FindStringSubmatch(d.String()); got != nil && m[1] == "" {
			m = got
		}
	}
	return m
}
