package app

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/txn"
)

// stoppingLine is what exitCode logs for err, and the exit code.
func stoppingLine(t *testing.T, cfg *config.Config, err error) (string, int) {
	t.Helper()
	var buf bytes.Buffer
	code := exitCode(err, cfg, nil, nil, slog.New(slog.NewTextHandler(&buf, nil)))
	return buf.String(), code
}

// Being fenced twice stops the processor with one line that names the ID
// and the variable that sets it.
func TestStoppingFencedNamesTheVariable(t *testing.T) {
	err := &txn.FencedError{TransactionalID: "tx-shared", Window: 10 * time.Minute, Err: errors.New("PRODUCER_FENCED")}
	line, code := stoppingLine(t, &config.Config{}, err)
	want := `stopping: producer fenced twice within 10m0s: another live instance is using transactional ID \"tx-shared\"; give every instance its own PROCESSOR_TRANSACTIONAL_ID (PRODUCER_FENCED)`
	if code != exitRuntime || !strings.Contains(line, want) {
		t.Errorf("exit %d, logged %s; want %d and %s", code, line, exitRuntime, want)
	}
}

// A commit to PostgreSQL that keeps failing stops the processor with one
// line naming the PROCESSOR_POSTGRES_ variable to check.
func TestStoppingPersistentNamesTheVariable(t *testing.T) {
	cfg := &config.Config{Sink: "postgres"}
	for _, tc := range []struct {
		pe   *sink.PersistentError
		want string
	}{
		{&sink.PersistentError{From: "pgsink", Destination: "PostgreSQL", Setting: "TABLE", Check: "it is gone",
			Attempts: 3, Err: errors.New(`relation "processor_records" does not exist`)},
			`stopping: pgsink: committing to PostgreSQL failed 3 times in a row with the same error, which retrying does not fix: relation \"processor_records\" does not exist; check PROCESSOR_POSTGRES_TABLE: it is gone`},
		{&sink.PersistentError{From: "pgsink", Destination: "PostgreSQL", Setting: "URL", Attempts: 3, Err: errors.New("read-only")},
			"; check PROCESSOR_POSTGRES_URL"},
	} {
		line, code := stoppingLine(t, cfg, tc.pe)
		if code != exitRuntime || !strings.Contains(line, tc.want) || strings.Count(line, "\n") != 1 {
			t.Errorf("exit %d, logged %s; want %d and one line with %s", code, line, exitRuntime, tc.want)
		}
	}
}
