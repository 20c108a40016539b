package app

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

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
	m := kprom.NewMetrics("processor", kprom.Registry(k.reg), kprom.Subsystem("kafka"))
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
