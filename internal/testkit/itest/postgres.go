package itest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/pgsink"
)

// OpenSink opens a postgres sink for group on db, as one instance's own
// (a process of its own would have its own connections).
func OpenSink(t testing.TB, db *pgtest.DB, group string) *pgsink.Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgsink.Open(ctx, pgsink.Options{URL: db.URL, Group: group, Metrics: pgsink.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatalf("opening the postgres sink: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// StoredTotal is the sum of the group's stored next offsets.
func StoredTotal(t testing.TB, db *pgtest.DB, group string) int {
	return db.Count(t, `SELECT coalesce(sum(next_offset), 0)::int FROM processor_offsets WHERE "group" = $1`, group)
}
