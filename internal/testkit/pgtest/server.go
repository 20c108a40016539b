package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/internal/testkit/repo"
)

// Server is a PostgreSQL of one test's own, run by the project's
// integration/postgres/pg.sh in a temporary folder on a free port, for a
// test that stops or restarts it: doing so to the shared server would
// disturb the tests running beside it.
type Server struct {
	URL    string   // as pg.sh up printed it
	Script string   // pg.sh's absolute path
	Env    []string // PROCESSOR_PG_DIR and PROCESSOR_PG_PORT: this server's, for pg.sh
	t      testing.TB
}

// StartServer starts a server of the test's own, stopped and wiped when
// the test ends. It runs where the shared server does (URL): where pg.sh
// or PostgreSQL's binaries are missing, the test fails in CI and is
// skipped elsewhere.
func StartServer(t testing.TB) *Server {
	t.Helper()
	URL(t) // the same condition as every database test
	unavailable := t.Skipf
	if os.Getenv("CI") != "" {
		unavailable = t.Fatalf
	}
	script := repo.Path(t, "integration", "postgres", "pg.sh")
	if _, err := os.Stat(script); err != nil {
		unavailable("no pg.sh to start a server with: %v", err)
	}
	// A folder the server's own user can enter (pg.sh, run as root, gives
	// it to the user postgres): TMPDIR may be private to root.
	tmp := ""
	if os.Geteuid() == 0 {
		tmp = "/tmp"
	}
	dir, err := os.MkdirTemp(tmp, "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Script: script, Env: []string{"PROCESSOR_PG_DIR=" + dir, "PROCESSOR_PG_PORT=" + strconv.Itoa(port)}, t: t}
	t.Cleanup(func() {
		if _, err := s.Run("down", "--wipe"); err != nil {
			t.Errorf("stopping the test's PostgreSQL: %v", err)
		}
		os.RemoveAll(dir)
	})
	if s.URL, err = s.Run("up"); err != nil {
		if strings.Contains(err.Error(), "apt-get install postgresql") {
			unavailable("%v", err)
		}
		t.Fatalf("starting a PostgreSQL of the test's own: %v", err)
	}
	return s
}

// Run runs pg.sh with args on this server and returns the last line of
// its output.
func (s *Server) Run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{s.Script}, args...)...)
	cmd.Env = append(os.Environ(), s.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("pg.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1], nil
}

// Must runs pg.sh with args and fails the test if it fails.
func (s *Server) Must(args ...string) {
	s.t.Helper()
	if _, err := s.Run(args...); err != nil {
		s.t.Fatal(err)
	}
}

// Dir is the server's folder (PROCESSOR_PG_DIR): its data folder is
// data inside it.
func (s *Server) Dir(t testing.TB) string {
	t.Helper()
	for _, e := range s.Env {
		if v, ok := strings.CutPrefix(e, "PROCESSOR_PG_DIR="); ok {
			return v
		}
	}
	t.Fatal("the server has no PROCESSOR_PG_DIR")
	return ""
}
