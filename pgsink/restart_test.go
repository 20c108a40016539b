package pgsink

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamproc/processor/internal/testkit/pgtest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/sink"
)

// testLog writes a logger's lines to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestServerRestart restarts the server between commits (fast: clients
// are disconnected; immediate: a crash and recovery), and stops it for a
// while: a Commit during the outage returns a Retriable error, and the
// first Commit after each restart succeeds, on new connections.
func TestServerRestart(t *testing.T) {
	srv := pgtest.StartServer(t)
	u := srv.URL
	m := NewMetrics(prometheus.NewRegistry())
	ctx := testCtx(t)
	s, err := Open(ctx, Options{URL: u, Group: "restart", Metrics: m, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := record.TopicPartition{Topic: "in", Partition: 0}
	commit := func(expected, next int64) error {
		return s.Commit(ctx, &sink.Batch{Rows: rows("in", 0, max(expected, 0), int(next-max(expected, 0))), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: expected, Next: next}}})
	}
	if err := commit(-1, 10); err != nil {
		t.Fatal(err)
	}
	// Both pooled connections in use once, so that both are dead below.
	if _, err := s.Offsets(ctx, nil); err != nil {
		t.Fatal(err)
	}
	srv.Must("restart", "fast")
	if err := commit(10, 20); err != nil {
		t.Fatalf("first Commit after a fast restart: %v", err)
	}
	srv.Must("restart", "immediate")
	if err := commit(20, 30); err != nil {
		t.Fatalf("first Commit after an immediate restart (crash recovery): %v", err)
	}
	srv.Must("stop", "immediate")
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = s.Commit(octx, &sink.Batch{Rows: rows("in", 0, 30, 10), Offsets: []sink.OffsetUpdate{{TopicPartition: p, Expected: 30, Next: 40}}})
	cancel()
	if err == nil || !Retriable(err) {
		t.Fatalf("Commit while the server is down = %v (Retriable %v), want a retriable error", err, Retriable(err))
	}
	t.Logf("Commit while the server is down: %v", err)
	if _, err := s.Offsets(ctx, nil); err == nil || !Retriable(err) {
		t.Errorf("Offsets while the server is down = %v, want a retriable error", err)
	}
	srv.Must("start")
	if err := commit(30, 40); err != nil {
		t.Fatalf("Commit after the server came back: %v", err)
	}
	if got, err := s.Offsets(ctx, nil); err != nil || got[p] != 40 {
		t.Errorf("Offsets = %v, %v; want in/0:40", got, err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, dups int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) - count(DISTINCT src_offset) FROM processor_records`).Scan(&n, &dups); err != nil {
		t.Fatal(err)
	}
	if n != 40 || dups != 0 {
		t.Errorf("%d rows, %d duplicates; want 40, 0", n, dups)
	}
	if testutil.ToFloat64(m.Commits) != 4 || testutil.ToFloat64(m.Rollbacks.WithLabelValues(RollbackError)) != 1 {
		t.Errorf("commits %v, rollbacks{error} %v; want 4, 1", testutil.ToFloat64(m.Commits), testutil.ToFloat64(m.Rollbacks.WithLabelValues(RollbackError)))
	}
}
