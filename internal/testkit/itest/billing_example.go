package itest

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvLines returns the VAR=value lines of an example's settings file
// name, whose content is text: every line not blank and not a comment
// must be one PROCESSOR_*=value.
func EnvLines(t *testing.T, name, text string) []string {
	t.Helper()
	var env []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, _, ok := strings.Cut(line, "="); !ok || !strings.HasPrefix(k, "PROCESSOR_") {
			t.Fatalf("%s: %q is not a PROCESSOR_*=value line", name, line)
		}
		env = append(env, line)
	}
	return env
}

// EnvValue returns the value of k in env.
func EnvValue(t *testing.T, env []string, k string) string {
	t.Helper()
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	t.Fatalf("the example's settings do not set %s", k)
	return ""
}

// billingCmd is a command of BinDir other than the processor, running
// until it exits or the test ends.
type billingCmd struct {
	Logs *SyncBuffer
	Done chan struct{}
	Err  error
}

// BillingCommand starts the command name of BinDir with args; when the
// test ends it gets SIGTERM (a clean stop), then SIGKILL. Its output is
// shown if the test fails.
func BillingCommand(t *testing.T, name string, args ...string) *billingCmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(BinDir, name), args...)
	c := &billingCmd{Logs: &SyncBuffer{}, Done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.Logs, c.Logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.Err = cmd.Wait()
		close(c.Done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.Done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-c.Done
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, c.Logs.String())
		}
	})
	return c
}
