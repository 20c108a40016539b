package state

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/internal/metric"
)

// TableStatus is a table of the join transform, for /status.
type TableStatus struct {
	Table string `json:"table"`
	// Mode is co_partitioned or global.
	Mode string `json:"mode"`
	// Ready is true once every partition kept was restored.
	Ready bool `json:"ready"`
	// Restoring is true while a Restore reads the table.
	Restoring bool `json:"restoring"`
	// RestoreRemaining is the offsets a restore still has to read, to
	// the ends it took when it began.
	RestoreRemaining int64 `json:"restore_remaining"`
	// Keys and Bytes (keys plus values) are the rows kept.
	Keys  int64 `json:"keys"`
	Bytes int64 `json:"bytes"`
	// Lag is how far the local copy is behind the table topic's last
	// stable offsets, as last fetched, over the partitions kept.
	Lag int64 `json:"lag"`
	// Misses are the records that found no row.
	Misses int64 `json:"misses"`
	// Undecodable are the rows left out because they did not decode.
	Undecodable int64                `json:"undecodable"`
	Partitions  []TablePartitionInfo `json:"partitions"`
}

// TablePartitionInfo is one partition of a table kept, for /status.
type TablePartitionInfo struct {
	Partition int32 `json:"partition"`
	// Position is the next table offset the local copy reflects.
	Position int64 `json:"position"`
	// RestoreFrom and RestoreTo are the last restore's bounds, Restored
	// the rows it read, Rebuilt whether it started from the topic's start.
	RestoreFrom int64 `json:"restore_from"`
	RestoreTo   int64 `json:"restore_to"`
	Restored    int64 `json:"restored_rows"`
	Rebuilt     bool  `json:"rebuilt"`
	Lag         int64 `json:"lag"`
}

// Status returns the table's status.
func (t *Table) Status() TableStatus {
	s := TableStatus{Table: t.o.Topic, Mode: "co_partitioned", Misses: t.misses.Load(), Undecodable: t.bad.Load()}
	if t.o.Global {
		s.Mode = "global"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range t.stats {
		s.Keys += st.keys
		s.Bytes += st.bytes
	}
	s.Ready = len(*t.ready.Load()) > 0
	for p, tp := range t.parts {
		pos := tp.from
		if tp.st.hasCP {
			pos = tp.st.cp.next
		}
		i := TablePartitionInfo{Partition: p, Position: pos, RestoreFrom: tp.from, RestoreTo: tp.end,
			Restored: tp.restored, Rebuilt: tp.rebuilt, Lag: max(0, tp.stable-pos)}
		if tp.restoring {
			s.Restoring, s.Ready = true, false
			s.RestoreRemaining += max(0, tp.end-pos)
		}
		s.Lag += i.Lag
		s.Partitions = append(s.Partitions, i)
	}
	sort.Slice(s.Partitions, func(i, j int) bool { return s.Partitions[i].Partition < s.Partitions[j].Partition })
	return s
}

// TableMetrics are the metrics of every table of a processor, registered
// once: processor_join_misses_total{table},
// processor_join_table_keys{table}, processor_join_table_bytes{table},
// processor_join_table_lag_records{table} and
// processor_join_table_restore_remaining_records{table}.
type TableMetrics struct {
	mu                                  sync.Mutex
	tables                              []*Table
	misses, keys, bytes, lag, remaining *prometheus.Desc
}

// NewTableMetrics returns the tables' metrics, registered with reg when
// it is not nil.
func NewTableMetrics(reg prometheus.Registerer) (*TableMetrics, error) {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(metric.Namespace, "", name), help, []string{"table"}, nil)
	}
	m := &TableMetrics{
		misses:    d("join_misses_total", "Records of a join that found no row in the table (an inner join filters them, a left join passes them with a null row)."),
		keys:      d("join_table_keys", "Rows a join's table keeps locally."),
		bytes:     d("join_table_bytes", "Bytes of keys and values a join's table keeps locally."),
		lag:       d("join_table_lag_records", "How far a join's local table is behind the table topic's last stable offsets, as last fetched."),
		remaining: d("join_table_restore_remaining_records", "Offsets of the table topic a restore of a join's table still has to read; 0 once restored."),
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Add reports t's metrics from now on.
func (m *TableMetrics) Add(t *Table) {
	m.mu.Lock()
	m.tables = append(m.tables, t)
	m.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (m *TableMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.misses, m.keys, m.bytes, m.lag, m.remaining} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *TableMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	tables := append([]*Table(nil), m.tables...)
	m.mu.Unlock()
	for _, t := range tables {
		s := t.Status()
		ch <- prometheus.MustNewConstMetric(m.misses, prometheus.CounterValue, float64(s.Misses), s.Table)
		ch <- prometheus.MustNewConstMetric(m.keys, prometheus.GaugeValue, float64(s.Keys), s.Table)
		ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(s.Bytes), s.Table)
		ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(s.Lag), s.Table)
		ch <- prometheus.MustNewConstMetric(m.remaining, prometheus.GaugeValue, float64(s.RestoreRemaining), s.Table)
	}
}
