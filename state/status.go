package state

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/internal/metric"
)

// StoreStatus is one partition of one store, for /status.
type StoreStatus struct {
	Store     string `json:"store"`
	Topic     string `json:"changelog"`
	Partition int32  `json:"partition"`
	// Ready is true once Restore made the partition usable, false while
	// it restores or after Revoke.
	Ready bool `json:"ready"`
	// Restoring is true while a Restore reads the partition.
	Restoring bool `json:"restoring"`
	// Checkpoint is the next changelog offset the local state reflects;
	// -1 without a checkpoint.
	Checkpoint int64 `json:"checkpoint"`
	// Keys and Bytes (keys plus values) are what the local state holds.
	Keys  int64 `json:"keys"`
	Bytes int64 `json:"bytes"`
	// RestoredRecords are the changelog records the last (or current)
	// restore read, from RestoreFrom towards RestoreTo; RestoreSeconds is
	// how long the last finished one took, and Rebuilt whether it started
	// from the changelog's start.
	RestoredRecords int64   `json:"restored_records"`
	RestoreFrom     int64   `json:"restore_from"`
	RestoreTo       int64   `json:"restore_to"`
	RestoreSeconds  float64 `json:"restore_seconds"`
	Rebuilt         bool    `json:"rebuilt"`
}

// Status returns every partition the Manager has restored or is
// restoring, sorted by store and partition.
func (m *Manager) Status() []StoreStatus {
	names := map[string]string{}
	for s, t := range m.topics {
		names[t] = s
	}
	m.mu.RLock()
	out := make([]StoreStatus, 0, len(m.parts))
	for p, pi := range m.parts {
		cp := int64(-1)
		if pi.st.hasCP {
			cp = pi.st.cp.next
		}
		out = append(out, StoreStatus{Store: names[p.topic], Topic: p.topic, Partition: p.partition,
			Ready: pi.ready, Restoring: pi.restoring, Checkpoint: cp, Keys: pi.st.keys, Bytes: pi.st.bytes,
			RestoredRecords: pi.restored, RestoreFrom: pi.from, RestoreTo: pi.end,
			RestoreSeconds: pi.seconds, Rebuilt: pi.rebuilt})
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Store != out[j].Store {
			return out[i].Store < out[j].Store
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// metrics are the Manager's collectors, collected as one.
type metrics struct {
	m        *Manager
	restored prometheus.Counter
	seconds  prometheus.Histogram
	rebuilds *prometheus.CounterVec
	keys     *prometheus.Desc
	bytes    *prometheus.Desc
}

// rebuildReasons are the values of processor_state_rebuilds_total's
// reason label (Manager.rebuildReason, and start_moved of reset).
var rebuildReasons = []string{"damaged", "layout", "no_checkpoint", "checkpoint_ahead", "checkpoint_before_start", "topic_recreated", "start_moved"}

func newMetrics(m *Manager) *metrics {
	c := newCollectors(m)
	for _, s := range m.opts.Stores { // every series from 0, so that an increase shows in a rate
		for _, r := range rebuildReasons {
			c.rebuilds.WithLabelValues(s, r)
		}
	}
	return c
}

func newCollectors(m *Manager) *metrics {
	return &metrics{m: m,
		restored: metric.Counter("state_restore_records_total", "Changelog records read to restore local state stores."),
		rebuilds: metric.CounterVec("state_rebuilds_total",
			"State store partitions rebuilt from their changelog's start, by why: damaged (the local store was damaged and wiped), layout (written by an older build in another key layout, and wiped: once, after an upgrade), no_checkpoint (a new or wiped directory), checkpoint_ahead, checkpoint_before_start, topic_recreated, start_moved (records deleted under the restore).",
			"store", "reason"),
		seconds: metric.Histogram("state_restore_seconds", "How long restoring the state stores of an assignment took.",
			[]float64{0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 1800}),
		keys: prometheus.NewDesc(prometheus.BuildFQName(metric.Namespace, "", "state_keys"),
			"Keys in a state store's assigned partitions, as committed.", []string{"store"}, nil),
		bytes: prometheus.NewDesc(prometheus.BuildFQName(metric.Namespace, "", "state_bytes"),
			"Bytes of keys and values in a state store's assigned partitions, as committed.", []string{"store"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *metrics) Describe(ch chan<- *prometheus.Desc) {
	c.restored.Describe(ch)
	c.seconds.Describe(ch)
	c.rebuilds.Describe(ch)
	ch <- c.keys
	ch <- c.bytes
}

// Collect implements prometheus.Collector: keys and bytes are summed over
// the partitions ready or restoring, every store reported, 0 when it has
// none.
func (c *metrics) Collect(ch chan<- prometheus.Metric) {
	c.restored.Collect(ch)
	c.seconds.Collect(ch)
	c.rebuilds.Collect(ch)
	keys, bytes := map[string]int64{}, map[string]int64{}
	for _, s := range c.m.Status() {
		if s.Ready || s.Restoring {
			keys[s.Store] += s.Keys
			bytes[s.Store] += s.Bytes
		}
	}
	for _, s := range c.m.opts.Stores {
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(keys[s]), s)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(bytes[s]), s)
	}
}
