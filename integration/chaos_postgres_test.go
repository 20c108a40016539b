package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The short chaos run into PostgreSQL (chaos -sink postgres): three
// processor processes write rows, dead letters and offsets in one database
// transaction per batch while input keeps arriving, through SIGKILL and
// restart, SIGTERM and restart, SIGSTOP past the session timeout, a scale
// out, two PostgreSQL restarts (fast, then immediate: a crash) and 5% of
// batches aborted on purpose; on kfake also a restart of the devbroker.
// Then eoscheck must find every input exactly once across the records and
// dead-letter tables, and the stored offsets at the input's end. It runs
// the default chain and policies (jq; fail, dlq and skip mixed), so a good
// record given up on shows up as an exit, a dead letter or a lost input.
//
// It runs where PROCESSOR_TEST_POSTGRES_URL says PostgreSQL is installed
// (and fails in CI without it), but on a server of its own, started with
// integration/postgres/pg.sh in a fresh folder on a free port: the drill
// restarts its server, and the pgsink tests use the shared one at the same
// time under go test ./... Against PROCESSOR_TEST_BROKERS as well, like
// TestChaosShort's kafka variant without the broker fault (chaos restarts
// the brokers of the three-node cluster only).
func TestChaosPostgres(t *testing.T) {
	if os.Getenv("PROCESSOR_TEST_POSTGRES_URL") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("PROCESSOR_TEST_POSTGRES_URL is not set: .ci/run must start integration/postgres/pg.sh and export the URL it prints last")
		}
		t.Skip("no PostgreSQL: start one with `make pg-up` and export PROCESSOR_TEST_POSTGRES_URL=<the URL it prints last>")
	}
	binary(t)
	script, pgURL, pgEnv := privatePostgres(t)
	run := func(t *testing.T, faults string, args ...string) {
		// The input lasts 30 s, as long as the faults, so that each
		// lands while records flow.
		out := runChaos(t, pgEnv, append([]string{"-sink", "postgres", "-postgres-url", pgURL, "-postgres-script", script,
			"-records", "15000", "-rate", "500", "-pause", "1s",
			"-faults", faults, "-iterations", fmt.Sprint(strings.Count(faults, ",") + 1 - strings.Count(faults, "abort"))}, args...)...)
		for _, want := range []string{"pgrestart  2 (1 fast, 1 immediate)\n", "kill       1\n", "term       1\n", "stop       1\n", "scale      1\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report has no line %q", want)
			}
		}
		if strings.Contains(faults, "broker") && !strings.Contains(out, "broker     1\n") {
			t.Errorf("the report has no line %q", "broker     1")
		}
	}
	t.Run("kfake", func(t *testing.T) { run(t, "kill,pgrestart,term,stop,pgrestart,scale,broker,abort", "-embedded") })
	if b := os.Getenv("PROCESSOR_TEST_BROKERS"); b != "" {
		t.Run("kafka", func(t *testing.T) { run(t, "kill,pgrestart,term,stop,pgrestart,scale,abort", "-brokers", b) })
	}
}

// privatePostgres starts a PostgreSQL server of the test's own with
// integration/postgres/pg.sh, in a new folder under the system's
// temporary directory (the server's user must be able to enter it, which
// rules out t.TempDir's private parents) on a free port, and removes it
// at the test's end. It returns the script's path, the server's URL, and
// the environment under which the script controls that server.
func privatePostgres(t *testing.T) (script, url string, env []string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("postgres", "pg.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env = []string{"PROCESSOR_PG_DIR=" + dir, fmt.Sprintf("PROCESSOR_PG_PORT=%d", port)}
	pg := func(ctx context.Context, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("pg.sh %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := pg(ctx, "down", "--wipe"); err != nil {
			t.Errorf("stopping the test's PostgreSQL: %v", err)
		}
		os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := pg(ctx, "up")
	if err != nil {
		t.Fatalf("starting a PostgreSQL of the test's own: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatal("pg.sh up printed no URL")
	}
	return script, lines[len(lines)-1], env
}
