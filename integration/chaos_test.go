package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The short chaos run: three processor processes in one group while input
// keeps arriving, with one of each fault (SIGKILL and restart, SIGTERM and
// restart, SIGSTOP past the session timeout, scale out, broker restart) and
// 5% of transactions aborted on purpose; then eoscheck must find no
// anomaly. On kfake it runs twice: with the identity transform and the
// fail policy, and with jq and the three error policies mixed in one group
// (instance 1 fails, 2 dead-letters, 3 skips), where any dead letter or
// missing output is a good record given up on. The broker fault restarts
// the devbroker process cleanly; against PROCESSOR_TEST_BROKERS (jq and
// mixed policies) there is no broker fault (the three-node cluster's is in
// make chaos-kafka).
func TestChaosShort(t *testing.T) {
	binary(t)
	run := func(t *testing.T, args ...string) {
		cmd := exec.Command(filepath.Join(binDir, "chaos"), append([]string{"-bin", binDir, "-logs", t.TempDir(),
			"-records", "15000", "-rate", "3000", "-iterations", "5", "-pause", "1s"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "every anomaly count is zero") {
			t.Fatalf("chaos: %v\n%s", err, out)
		}
		t.Logf("%s", out[strings.Index(string(out), "chaos run:"):])
	}
	t.Run("kfake/identity", func(t *testing.T) { run(t, "-embedded", "-transforms", "identity", "-policies", "fail") })
	t.Run("kfake/jq-policies", func(t *testing.T) { run(t, "-embedded", "-transforms", "jq", "-policies", "fail,dlq,skip") })
	if b := os.Getenv("PROCESSOR_TEST_BROKERS"); b != "" {
		t.Run("kafka", func(t *testing.T) {
			run(t, "-brokers", b, "-faults", "kill,term,stop,scale,abort", "-transforms", "jq", "-policies", "fail,dlq,skip")
		})
	}
}
