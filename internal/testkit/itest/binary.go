package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/launch"
	_ "github.com/streamproc/processor/transform/all" // what the binary registers
)

// The commands Binary builds once per test binary: BinDir is their
// directory, which Main removes after the tests.
var (
	buildOnce sync.Once
	BinDir    string
	buildErr  error
)

// Deadlines of the tests that run a binary: each wait fails the test with
// a message instead of hanging until go test's global timeout.
const (
	buildTimeout      = 5 * time.Minute  // building every command once
	ExitTimeout       = 20 * time.Second // a binary that must exit by itself (bad configuration)
	binaryRunTimeout  = 5 * time.Minute  // a processor binary's whole run (RunBinary); killed then
	BinaryKillTimeout = 30 * time.Second // a binary to exit after SIGKILL
	LoadgenTimeout    = 30 * time.Second // loadgen writing its records
)

// BinaryHTTP bounds every request to a running binary's HTTP server: a
// server that accepts and never answers fails the wait it is polled from.
var BinaryHTTP = &http.Client{Timeout: 5 * time.Second}

// HTTPGet returns the status and body of a GET, or 0 and the error.
func HTTPGet(addr, path string) (int, string) {
	resp, err := BinaryHTTP.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Binary builds every command (processor, loadgen, devbroker, eoscheck,
// chaos) once per test run and returns the processor's path.
func Binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		BinDir, buildErr = os.MkdirTemp("", "processor-bin")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", BinDir, "github.com/streamproc/processor/cmd/...").CombinedOutput()
		switch {
		case ctx.Err() != nil:
			buildErr = fmt.Errorf("go build did not finish within %s\n%s", buildTimeout, out)
		case err != nil:
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(BinDir, "processor")
}

// FreeAddr returns a 127.0.0.1 address with a port free right now, for a
// binary's HTTP server.
func FreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// RunBadConfig runs bin with PATH and env alone, a bad configuration: it
// must exit 2 at once with one line on stderr. It reports a failure
// otherwise, and returns stderr, trimmed, for the caller to check.
func RunBadConfig(t *testing.T, bin string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ExitTimeout)
	defer cancel()
	var stderr bytes.Buffer
	p, err := launch.Start(ctx, launch.Command{ // killed at the deadline
		Path:      bin,
		Env:       launch.Environ(launch.PathOnly, env...),
		Output:    &stderr,
		WaitDelay: 5 * time.Second, // and its end is seen even if something still holds its stderr
	})
	if err == nil {
		err = p.Wait()
	}
	msg := strings.TrimSpace(stderr.String())
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Errorf("%v: still running %s after start, killed; bad configuration must exit 2 at once (stderr %q)", env, ExitTimeout, msg)
	case !errors.As(err, &ee) || ee.ExitCode() != 2:
		t.Errorf("%v: exit %v, want code 2 (stderr %q)", env, err, msg)
	case strings.Contains(msg, "\n"):
		t.Errorf("%v: stderr %q, want one line", env, msg)
	}
	return msg
}

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p under the lock.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
