package pgsink

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamproc/processor/internal/pgtest"
)

// scriptVar overrides where the restart test finds pg.sh.
const scriptVar = "PROCESSOR_TEST_POSTGRES_SCRIPT"

// pgServer is a PostgreSQL of one test's own, run by pg.sh in a temporary
// folder on a free port, so that stopping it disturbs no other test.
type pgServer struct {
	t      *testing.T
	script string
	env    []string
}

// newServer starts a server with pg.sh. Where pg.sh or PostgreSQL's
// binaries are missing, the test fails in CI and is skipped elsewhere.
func newServer(t *testing.T) (*pgServer, string) {
	pgtest.URL(t) // the same condition as every database test
	script := os.Getenv(scriptVar)
	if script == "" {
		script = "../integration/postgres/pg.sh"
	}
	unavailable := t.Skipf
	if os.Getenv("CI") != "" {
		unavailable = t.Fatalf
	}
	if _, err := os.Stat(script); err != nil {
		unavailable("no pg.sh to restart a server with (%v); set %s", err, scriptVar)
	}
	// A folder the server's own user can enter (pg.sh, run as root, gives
	// it to the user postgres), outside t.TempDir, whose parent is private.
	tmp := ""
	if os.Geteuid() == 0 {
		tmp = "/tmp" // TMPDIR may be private to root
	}
	dir, err := os.MkdirTemp(tmp, "pgsink-restart-")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &pgServer{t: t, script: script, env: append(os.Environ(), "PROCESSOR_PG_DIR="+dir, "PROCESSOR_PG_PORT="+strconv.Itoa(port))}
	t.Cleanup(func() {
		if _, err := s.run("down", "--wipe"); err != nil {
			t.Errorf("pg.sh down --wipe: %v", err)
		}
		os.RemoveAll(dir)
	})
	u, err := s.run("up")
	if err != nil {
		if strings.Contains(err.Error(), "apt-get install postgresql") {
			unavailable("%v", err)
		}
		t.Fatalf("pg.sh up: %v", err)
	}
	return s, u
}

// run runs pg.sh with args and returns the last line of its output.
func (s *pgServer) run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{s.script}, args...)...)
	cmd.Env = s.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("pg.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1], nil
}

// must runs pg.sh with args and fails the test if it fails.
func (s *pgServer) must(args ...string) {
	s.t.Helper()
	if _, err := s.run(args...); err != nil {
		s.t.Fatal(err)
	}
}

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
	srv, u := newServer(t)
	m := NewMetrics(prometheus.NewRegistry())
	ctx := testCtx(t)
	s, err := Open(ctx, Options{URL: u, Group: "restart", Metrics: m, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := TopicPartition{"in", 0}
	commit := func(expected, next int64) error {
		return s.Commit(ctx, &Batch{Rows: rows("in", 0, max(expected, 0), int(next-max(expected, 0))), Offsets: []OffsetUpdate{{p, expected, next}}})
	}
	if err := commit(-1, 10); err != nil {
		t.Fatal(err)
	}
	// Both pooled connections in use once, so that both are dead below.
	if _, err := s.Offsets(ctx, nil); err != nil {
		t.Fatal(err)
	}
	srv.must("restart", "fast")
	if err := commit(10, 20); err != nil {
		t.Fatalf("first Commit after a fast restart: %v", err)
	}
	srv.must("restart", "immediate")
	if err := commit(20, 30); err != nil {
		t.Fatalf("first Commit after an immediate restart (crash recovery): %v", err)
	}
	srv.must("stop", "immediate")
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = s.Commit(octx, &Batch{Rows: rows("in", 0, 30, 10), Offsets: []OffsetUpdate{{p, 30, 40}}})
	cancel()
	if err == nil || !Retriable(err) {
		t.Fatalf("Commit while the server is down = %v (Retriable %v), want a retriable error", err, Retriable(err))
	}
	t.Logf("Commit while the server is down: %v", err)
	if _, err := s.Offsets(ctx, nil); err == nil || !Retriable(err) {
		t.Errorf("Offsets while the server is down = %v, want a retriable error", err)
	}
	srv.must("start")
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
