package state

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The state metrics carry the restored records and, per store, the keys
// and bytes of the partitions assigned.
func TestMetrics(t *testing.T) {
	e := newEnv(t, 1)
	m := e.open()
	e.txn(m, false, func(tx *Txn) { // committed in Kafka only: the next restore reads it
		put(t, store(t, tx, "counts", 0), "a", "12345")
		put(t, store(t, tx, "counts", 0), "b", "6")
	})
	_ = m.Close()
	reg := prometheus.NewRegistry()
	m, err := Open(Options{Dir: e.dir, Group: e.group, Stores: []string{"counts", "seen"},
		ClientOpts: e.c.ClientOpts(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Restore(ctx(t), []int32{0}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP processor_state_bytes Bytes of keys and values in a state store's assigned partitions, as committed.
# TYPE processor_state_bytes gauge
processor_state_bytes{store="counts"} 8
processor_state_bytes{store="seen"} 0
# HELP processor_state_keys Keys in a state store's assigned partitions, as committed.
# TYPE processor_state_keys gauge
processor_state_keys{store="counts"} 2
processor_state_keys{store="seen"} 0
# HELP processor_state_restore_records_total Changelog records read to restore local state stores.
# TYPE processor_state_restore_records_total counter
processor_state_restore_records_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "processor_state_bytes",
		"processor_state_keys", "processor_state_restore_records_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.met, "processor_state_restore_seconds"); n != 1 {
		t.Fatalf("%d restore_seconds series, want 1", n)
	}
}
