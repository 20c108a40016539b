package chaos

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/internal/testkit/pgtest"
)

// The short chaos run into PostgreSQL (chaos -sink postgres): three
// processor processes write rows, dead letters and offsets in one database
// transaction per batch while input keeps arriving, through SIGKILL and
// restart, SIGTERM and restart, SIGSTOP past the session timeout, a scale
// out, two PostgreSQL restarts (fast, then immediate: a crash), rows made
// 5 ms slower for 10 s (pgslow), an instance frozen inside its database
// transaction until the others have written its partitions (pgfreeze) and
// 5% of batches aborted on purpose; on kfake also a restart of the devbroker.
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
// the brokers of the three-node cluster only). A drill: it runs under make
// drill, not make test.
func TestChaosPostgres(t *testing.T) {
	drill(t)
	srv := pgtest.StartServer(t)
	itest.Binary(t)
	script, pgURL, pgEnv := srv.Script, srv.URL, srv.Env
	run := func(t *testing.T, faults string, args ...string) {
		// The input lasts 30 s, as long as the faults, so that each
		// lands while records flow (pgslow and pgfreeze early: they
		// need a backlog, and input for the frozen one's partitions).
		out := runChaos(t, pgEnv, append([]string{"-sink", "postgres", "-postgres-url", pgURL, "-postgres-script", script,
			"-records", "15000", "-rate", "500", "-pause", "1s",
			"-faults", faults, "-iterations", fmt.Sprint(strings.Count(faults, ",") + 1 - strings.Count(faults, "abort"))}, args...)...)
		for _, want := range []string{"pgrestart  2 (1 fast, 1 immediate)\n", "kill       1\n", "term       1\n", "stop       1\n", "scale      1\n",
			"pgslow     1\n", "pgfreeze   1\n", "stored by the others (freeze to every partition stored)"} {
			if !strings.Contains(out, want) {
				t.Errorf("the report has no line %q", want)
			}
		}
		if strings.Contains(faults, "broker") && !strings.Contains(out, "broker     1\n") {
			t.Errorf("the report has no line %q", "broker     1")
		}
	}
	t.Run("kfake", func(t *testing.T) {
		run(t, "kill,pgslow,pgfreeze,pgrestart,term,stop,pgrestart,scale,broker,abort", "-embedded")
	})
	if b := os.Getenv(kafkatest.BrokersVar); b != "" {
		t.Run("kafka", func(t *testing.T) {
			run(t, "kill,pgslow,pgfreeze,pgrestart,term,stop,pgrestart,scale,abort", "-brokers", b)
		})
	}
}
