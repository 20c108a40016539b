package deploy

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scripts/run.sh, behind make run and make run-billing: the port check
// before anything starts, and each of the processor and loadgen stopped
// when the other ends.

const runScript = "../scripts/run.sh"

// runScriptIn runs scripts/run.sh args in dir with the PROCESSOR_*
// variables env, and returns its exit code and output.
func runScriptIn(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	script, err := filepath.Abs(runScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(processorFreeEnv(), env...)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	return exitOf(t, cmd, fmt.Sprintf("scripts/run.sh %q", args))
}

// held listens on a loopback port until the test ends.
func held(t *testing.T) (addr, port string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return ln.Addr().String(), port
}

func TestRunPortCheck(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	brokerAddr, brokerPort := held(t)
	_, httpPort := held(t)
	freeBroker := freeAddr(t)
	_, freeHTTPPort, _ := net.SplitHostPort(freeAddr(t))
	dir := t.TempDir()

	for _, c := range []struct {
		name     string
		env      []string
		code     int
		mentions []string
	}{
		{"broker port taken", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + brokerAddr, "PROCESSOR_HTTP_ADDR=:" + freeHTTPPort},
			2, []string{brokerAddr, "is taken", "make run PROCESSOR_EMBEDDED_BROKER_ADDR=127.0.0.1:"}},
		{"HTTP port taken", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeBroker, "PROCESSOR_HTTP_ADDR=:" + httpPort},
			2, []string{"port " + httpPort, "is taken", "make run PROCESSOR_HTTP_ADDR=:"}},
		{"both taken", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=127.0.0.1:" + brokerPort, "PROCESSOR_HTTP_ADDR=127.0.0.1:" + httpPort},
			2, []string{brokerAddr, "port " + httpPort}},
		{"same port", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeBroker, "PROCESSOR_HTTP_ADDR=" + freeBroker},
			2, []string{"the same port"}},
		{"bad address", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeBroker, "PROCESSOR_HTTP_ADDR=8080"},
			2, []string{`PROCESSOR_HTTP_ADDR="8080" is invalid`}},
		{"free", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeBroker, "PROCESSOR_HTTP_ADDR=:" + freeHTTPPort},
			0, nil},
		{"registry port taken", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeBroker, "PROCESSOR_HTTP_ADDR=:" + freeHTTPPort,
			"PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true", "PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR=" + brokerAddr},
			2, []string{brokerAddr, "embedded Schema Registry", "is taken", "make run PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR=127.0.0.1:"}},
		{"registry port unchecked without the registry", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeBroker, "PROCESSOR_HTTP_ADDR=:" + freeHTTPPort,
			"PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR=" + brokerAddr},
			0, nil},
		{"registry on the broker's port", []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeBroker, "PROCESSOR_HTTP_ADDR=:" + freeHTTPPort,
			"PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true", "PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR=" + freeBroker},
			2, []string{"choose another"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := runScriptIn(t, dir, c.env, "--check", "make run")
			if code != c.code {
				t.Errorf("exit %d, want %d; output %q", code, c.code, out)
			}
			for _, m := range c.mentions {
				if !strings.Contains(out, m) {
					t.Errorf("output %q does not mention %q", out, m)
				}
			}
			// The suggested address is free.
			if i := strings.Index(out, "PROCESSOR_HTTP_ADDR=:"); c.code == 2 && i >= 0 && strings.Contains(out, "is taken") {
				p := strings.TrimRight(strings.Fields(out[i+len("PROCESSOR_HTTP_ADDR=:"):])[0], ")")
				if p == httpPort {
					t.Errorf("suggests the taken port %s", p)
				}
			}
		})
	}
	// The whole run (no --check): a taken port starts nothing, so no
	// loadgen writes into whatever answers there.
	writeStub(t, dir, "processor", "echo started > processor.ran")
	writeStub(t, dir, "loadgen", "echo started > loadgen.ran")
	if code, out := runScriptIn(t, dir, []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + brokerAddr, "PROCESSOR_HTTP_ADDR=:" + freeHTTPPort}, "make run", "100"); code != 2 {
		t.Errorf("make run with the broker port taken: exit %d, %q; want 2", code, out)
	}
	for _, f := range []string{"processor.ran", "loadgen.ran"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s started although a port is taken", strings.TrimSuffix(f, ".ran"))
		}
	}
}

// writeStub writes dir/bin/name, a shell script running body.
func writeStub(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// A stand-in that runs until SIGTERM, then records it and exits 0.
const untilTerm = `trap 'echo term > $0.term; exit 0' TERM
while :; do sleep 0.05; done`

func TestRunStopsTheOther(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	env := func() []string {
		_, p, _ := net.SplitHostPort(freeAddr(t))
		return []string{"PROCESSOR_EMBEDDED_BROKER_ADDR=" + freeAddr(t), "PROCESSOR_HTTP_ADDR=:" + p}
	}
	t.Run("processor exits", func(t *testing.T) {
		dir := t.TempDir()
		writeStub(t, dir, "processor", "sleep 0.3; exit 3")
		writeStub(t, dir, "loadgen", untilTerm)
		code, out := runScriptIn(t, dir, env(), "make run", "100")
		if code != 3 {
			t.Errorf("exit %d, want the processor's 3; output %q", code, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "bin", "loadgen.term")); err != nil {
			t.Errorf("loadgen was not stopped when the processor exited: %v; output %q", err, out)
		}
		if !strings.Contains(out, "the processor exited with code 3; stopping loadgen") {
			t.Errorf("output %q does not say why loadgen stops", out)
		}
	})
	t.Run("loadgen fails", func(t *testing.T) {
		dir := t.TempDir()
		writeStub(t, dir, "processor", untilTerm)
		writeStub(t, dir, "loadgen", "sleep 0.3; exit 1")
		code, out := runScriptIn(t, dir, env(), "make run", "100")
		if code != 1 {
			t.Errorf("exit %d, want loadgen's 1; output %q", code, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "bin", "processor.term")); err != nil {
			t.Errorf("the processor was not stopped when loadgen failed: %v; output %q", err, out)
		}
	})
	t.Run("loadgen gets the broker address", func(t *testing.T) {
		dir := t.TempDir()
		e := env()
		writeStub(t, dir, "processor", `echo "$PROCESSOR_EMBEDDED_BROKER_ADDR $PROCESSOR_HTTP_ADDR" > processor.env; sleep 0.5`)
		writeStub(t, dir, "loadgen", `echo "$@" > loadgen.args; `+untilTerm)
		if code, out := runScriptIn(t, dir, e, "make run", "123"); code != 0 {
			t.Errorf("exit %d, want 0; output %q", code, out)
		}
		broker := strings.TrimPrefix(e[0], "PROCESSOR_EMBEDDED_BROKER_ADDR=")
		if got := readFile(t, filepath.Join(dir, "loadgen.args")); !strings.Contains(got, "-brokers "+broker+" ") || !strings.Contains(got, "-rate 123") {
			t.Errorf("loadgen ran with %q, want -brokers %s and -rate 123", got, broker)
		}
		if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "processor.env"))); got != broker+" "+strings.TrimPrefix(e[1], "PROCESSOR_HTTP_ADDR=") {
			t.Errorf("the processor ran with %q", got)
		}
	})
	t.Run("LOADGEN_ARGS and RUN_SHOW_ARGS", func(t *testing.T) {
		dir := t.TempDir()
		e := append(env(), "LOADGEN_ARGS=-format avro", "RUN_SHOW_ARGS=-read 3 -topic out")
		writeStub(t, dir, "processor", `sleep 0.5`)
		writeStub(t, dir, "loadgen", `case "$*" in *-read*) echo "$@" > show.args; exit 0 ;; esac; echo "$@" > loadgen.args; `+untilTerm)
		if code, out := runScriptIn(t, dir, e, "make run", "123"); code != 0 {
			t.Errorf("exit %d, want 0 (the show ending stops nothing); output %q", code, out)
		}
		if got := readFile(t, filepath.Join(dir, "loadgen.args")); !strings.Contains(got, "-rate 123") || !strings.HasSuffix(strings.TrimSpace(got), "-format avro") {
			t.Errorf("loadgen ran with %q, want -rate 123 and LOADGEN_ARGS last", got)
		}
		if got := readFile(t, filepath.Join(dir, "show.args")); !strings.Contains(got, "-read 3 -topic out") {
			t.Errorf("the show ran with %q, want RUN_SHOW_ARGS", got)
		}
	})
}

// TestMakeRunTargets: make run, make run-billing and make run-avro go
// through scripts/run.sh; run-billing checks the ports before it touches
// PostgreSQL, run-avro (the registry's port too) before it removes
// data/avro.
func TestMakeRunTargets(t *testing.T) {
	mk := parseMakefile(t)
	for _, target := range []string{"run", "run-billing", "run-avro"} {
		r := mk.recipes[target]
		if !strings.Contains(r, "scripts/run.sh \"make "+target+"\"") {
			t.Errorf("%s: make %s does not run scripts/run.sh \"make %s\": %s", makefileFile, target, target, r)
		}
		if strings.Contains(r, "./bin/loadgen") || strings.Contains(r, "./bin/processor") {
			t.Errorf("%s: make %s starts a binary itself; scripts/run.sh starts both, so that one stops with the other", makefileFile, target)
		}
	}
	r := mk.recipes["run-billing"]
	if c, pg := strings.Index(r, "scripts/run.sh --check"), strings.Index(r, "$(PG) up"); c < 0 || pg < 0 || c > pg {
		t.Errorf("%s: make run-billing must check the ports (scripts/run.sh --check) before starting PostgreSQL", makefileFile)
	}
	r = mk.recipes["run-avro"]
	if c, rm := strings.Index(r, "PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true bash scripts/run.sh --check"), strings.Index(r, "rm -rf data/avro"); c < 0 || rm < 0 || c > rm {
		t.Errorf("%s: make run-avro must check the ports, the registry's included, before removing data/avro", makefileFile)
	}
}

// make fuzz bounds the shrinking of each interesting input to a count of
// executions, a small part of FuzzJQDiff's budget: with Go's default of
// 60 s, one long input spent most of the run's executions being shrunk,
// the progress line at 0 execs/sec, and none of them explored.
func TestMakeFuzzBoundsMinimization(t *testing.T) {
	mk := parseMakefile(t)
	count := func(name string) int {
		v := mk.vars[name]
		n, err := strconv.Atoi(strings.TrimSuffix(v, "x"))
		if !strings.HasSuffix(v, "x") || err != nil || n <= 0 {
			t.Fatalf("%s: %s = %q, want a count of executions such as 10000x", makefileFile, name, v)
		}
		return n
	}
	if m, budget := count("FUZZMINIMIZETIME"), count("FUZZTIME"); m*10 > budget {
		t.Errorf("%s: FUZZMINIMIZETIME (%d) is more than a tenth of FUZZTIME (%d)", makefileFile, m, budget)
	}
	runs := 0
	for _, cmd := range strings.Split(mk.recipes["fuzz"], "; ") {
		if !strings.Contains(cmd, " -fuzz ") {
			continue
		}
		runs++
		if !strings.Contains(cmd, " -fuzzminimizetime $(FUZZMINIMIZETIME) ") {
			t.Errorf("%s: make fuzz runs %q without -fuzzminimizetime $(FUZZMINIMIZETIME)", makefileFile, cmd)
		}
	}
	if runs == 0 {
		t.Errorf("%s: make fuzz runs no fuzz target: %q", makefileFile, mk.recipes["fuzz"])
	}
}
