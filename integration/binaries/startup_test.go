package binaries

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/launch"
)

// A database that is down at start is no reason for a startup probe to
// kill the pod: /healthz answers alive and /readyz not ready, saying what
// the start waits for, from the first moment and for as long as
// PostgreSQL cannot be reached; SIGTERM still stops it cleanly.
func TestBinaryPostgresDownAtStartServesProbes(t *testing.T) {
	t.Parallel()
	httpAddr := itest.FreeAddr(t)
	started := time.Now()
	p := itest.RunBinary(t, "processor", launch.Instance{
		Brokers:     []string{itest.FreeAddr(t)}, // not reached: the database comes first
		Group:       "pg-down",
		InputTopics: []string{"in"},
		Sink:        "postgres",
		Settings: map[string]string{
			"PROCESSOR_POSTGRES_URL": "postgres://processor:pw@" + itest.FreeAddr(t) + "/processor?sslmode=disable", // nothing listens
		},
		HTTPAddr:  httpAddr,
		LogFormat: "text",
	})
	var health, ready int
	var readyBody string
	itest.WaitFor(t, 10*time.Second, "the HTTP endpoints while PostgreSQL is down", func() bool {
		health, _ = itest.HTTPGet(httpAddr, "/healthz")
		ready, readyBody = itest.HTTPGet(httpAddr, "/readyz")
		return health != 0 && ready != 0
	})
	if health != http.StatusOK {
		t.Errorf("/healthz = %d, want 200 while connecting", health)
	}
	if ready != http.StatusServiceUnavailable || !strings.Contains(readyBody, "connecting to PostgreSQL") {
		t.Errorf("/readyz = %d %q, want 503 naming PostgreSQL", ready, readyBody)
	}
	itest.WaitFor(t, 30*time.Second, "a retry of the database", func() bool {
		return strings.Contains(p.Logs.String(), "cannot open the PostgreSQL database; retrying")
	})
	// Still alive, still waiting, long after the first attempt.
	if code, body := itest.HTTPGet(httpAddr, "/status"); code != http.StatusOK || !strings.Contains(body, `"starting": "connecting to PostgreSQL"`) {
		t.Errorf("/status = %d %q, want the starting processor", code, body)
	}
	if code, body := itest.HTTPGet(httpAddr, "/"); code != http.StatusOK || !strings.Contains(body, "connecting to PostgreSQL") {
		t.Errorf("status page = %d, want it to say what the start waits for: %q", code, body)
	}
	if code, _ := itest.HTTPGet(httpAddr, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d after %s, want 200", code, time.Since(started).Round(time.Second))
	}
	select {
	case <-p.Done:
		t.Fatalf("exited while PostgreSQL was down: %v", p.Err)
	default:
	}
	p.Terminate(t)
}
