package launch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A zero instance sets nothing; every field renders as its documented
// variable, in a fixed order, the settings sorted by name and the extra
// variables last.
func TestInstanceEnv(t *testing.T) {
	if env := (Instance{}).Env(); len(env) != 0 {
		t.Errorf("zero Instance renders %v, want nothing", env)
	}
	in := Instance{
		Brokers: []string{"a:1", "b:2"}, EmbeddedBroker: "127.0.0.1:9", EmbeddedBrokerDir: "/data", EmbeddedBrokerPartitions: 3,
		Group: "g", InputTopics: []string{"in", "in2"}, OutputTopic: "out",
		TransactionalID: "g-1", InstanceID: "g-1", Guarantee: "at_least_once", Sink: "postgres",
		Transforms: []string{"jq", "identity"}, Settings: map[string]string{"PROCESSOR_JQ_EXPR": ".a = 1", "PROCESSOR_B": "x=y"},
		OnError: "dlq", DLQTopic: "dead",
		CommitInterval: 200 * time.Millisecond, SessionTimeout: 6 * time.Second, TransactionTimeout: 5 * time.Second,
		ProgressInterval: 250 * time.Millisecond, Workers: 2, HTTPAddr: "127.0.0.1:0", LogFormat: "json", LogLevel: "debug",
		Extra: []string{"PROCESSOR_TEST_ABORT_RATE=0.05", "PROCESSOR_WORKERS=3"},
	}
	want := []string{
		"PROCESSOR_BROKERS=a:1,b:2", "PROCESSOR_EMBEDDED_BROKER=true", "PROCESSOR_EMBEDDED_BROKER_ADDR=127.0.0.1:9",
		"PROCESSOR_EMBEDDED_BROKER_DIR=/data", "PROCESSOR_EMBEDDED_BROKER_PARTITIONS=3", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in,in2", "PROCESSOR_OUTPUT_TOPIC=out",
		"PROCESSOR_TRANSACTIONAL_ID=g-1", "PROCESSOR_INSTANCE_ID=g-1", "PROCESSOR_GUARANTEE=at_least_once", "PROCESSOR_SINK=postgres",
		"PROCESSOR_TRANSFORMS=jq,identity", "PROCESSOR_ON_ERROR=dlq", "PROCESSOR_DLQ_TOPIC=dead",
		"PROCESSOR_COMMIT_INTERVAL=200ms", "PROCESSOR_SESSION_TIMEOUT=6s", "PROCESSOR_TRANSACTION_TIMEOUT=5s",
		"PROCESSOR_PROGRESS_INTERVAL=250ms", "PROCESSOR_WORKERS=2", "PROCESSOR_HTTP_ADDR=127.0.0.1:0", "PROCESSOR_LOG_FORMAT=json",
		"PROCESSOR_LOG_LEVEL=debug",
		"PROCESSOR_B=x=y", "PROCESSOR_JQ_EXPR=.a = 1",
		"PROCESSOR_TEST_ABORT_RATE=0.05", "PROCESSOR_WORKERS=3",
	}
	if got := in.Env(); !slices.Equal(got, want) {
		t.Errorf("Env() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// PathOnly passes PATH alone; Inherit passes the caller's environment but
// its PROCESSOR_* variables; the instance's variables come on top.
func TestEnviron(t *testing.T) {
	t.Setenv("PROCESSOR_GROUP", "from-the-caller")
	t.Setenv("LAUNCH_TEST_KEEP", "kept")
	if got, want := Environ(PathOnly, "PROCESSOR_GROUP=g"), []string{"PATH=" + os.Getenv("PATH"), "PROCESSOR_GROUP=g"}; !slices.Equal(got, want) {
		t.Errorf("Environ(PathOnly) = %v, want %v", got, want)
	}
	got := Environ(Inherit, "PROCESSOR_GROUP=g")
	if !slices.Contains(got, "LAUNCH_TEST_KEEP=kept") || slices.Contains(got, "PROCESSOR_GROUP=from-the-caller") {
		t.Errorf("Environ(Inherit) = %v: want the caller's variables but its PROCESSOR_* ones", got)
	}
	if got[len(got)-1] != "PROCESSOR_GROUP=g" {
		t.Errorf("Environ(Inherit) ends with %q, want the instance's variable", got[len(got)-1])
	}
	cmd := Instance{Group: "g"}.Command("/bin/processor", PathOnly)
	if cmd.Path != "/bin/processor" || !slices.Equal(cmd.Env, Environ(PathOnly, "PROCESSOR_GROUP=g")) {
		t.Errorf("Command = %+v", cmd)
	}
}

func sh(script string) Command { return Command{Path: "/bin/sh", Args: []string{"-c", script}} }

// The log file gets stderr (and stdout with Stdout), appended run after
// run, LogFrom saying where each run's lines begin; the exit code is
// reported once the process is done.
func TestStartLogsAndExit(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	c := sh("echo out; echo err >&2; exit 3")
	c.Log = log
	p, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err == nil || p.ExitCode() != 3 {
		t.Errorf("Wait = %v, ExitCode %d; want exit code 3", err, p.ExitCode())
	}
	if p.LogFrom() != 0 || p.Log() != log {
		t.Errorf("first run: LogFrom %d, Log %q", p.LogFrom(), p.Log())
	}
	c.Stdout = true
	p, err = Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Wait()
	if p.LogFrom() != int64(len("err\n")) {
		t.Errorf("second run: LogFrom %d, want %d", p.LogFrom(), len("err\n"))
	}
	if b, _ := os.ReadFile(log); string(b) != "err\nout\nerr\n" {
		t.Errorf("log %q, want stderr of the first run, then stdout and stderr of the second", b)
	}
	c.Truncate, c.Stdout = true, false
	p, err = Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Wait()
	if b, _ := os.ReadFile(log); string(b) != "err\n" {
		t.Errorf("with Truncate: log %q, want only this run's stderr", b)
	}
}

// Output takes the place of a log file; the environment is the command's.
func TestStartOutput(t *testing.T) {
	var out bytes.Buffer
	c := sh(`echo "$LAUNCH_X" >&2`)
	c.Env, c.Output, c.WaitDelay = []string{"LAUNCH_X=hello"}, &out, time.Second
	p, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil || p.ExitCode() != 0 {
		t.Errorf("Wait = %v, ExitCode %d; want 0", err, p.ExitCode())
	}
	if out.String() != "hello\n" {
		t.Errorf("output %q, want hello", out.String())
	}
}

// Stop ends a process that heeds the signal, and kills one that does not
// once the time is up.
func TestStop(t *testing.T) {
	p, err := Start(context.Background(), sh("exec sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	if p.ExitCode() != -1 || p.Err() != nil {
		t.Errorf("running: ExitCode %d, Err %v", p.ExitCode(), p.Err())
	}
	if !p.Stop(syscall.SIGTERM, 10*time.Second) {
		t.Error("Stop(SIGTERM) of sleep: not exited in time")
	}
	c := sh(`trap "" TERM; echo ready >&2; exec sleep 30`)
	c.Log = filepath.Join(t.TempDir(), "deaf.log")
	deaf, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) { // the trap in place
		if b, _ := os.ReadFile(c.Log); string(b) == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell did not say ready")
		}
	}
	began := time.Now()
	if deaf.Stop(syscall.SIGTERM, 200*time.Millisecond) {
		t.Error("Stop(SIGTERM) of a process that ignores it: reported exited by itself")
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("Stop took %s", d)
	}
	select {
	case <-deaf.Done():
	default:
		t.Error("Stop returned before the process exited")
	}
}

// The context's end kills the process; a binary that cannot start, or a
// log that cannot be opened, is an error and leaves nothing running.
func TestStartFailuresAndContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, sh("exec sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context's end did not kill the process")
	}
	if _, err := Start(context.Background(), Command{Path: filepath.Join(t.TempDir(), "nonexistent")}); err == nil {
		t.Error("Start of a missing binary succeeded")
	}
	c := sh("true")
	c.Log = filepath.Join(t.TempDir(), "no", "such", "dir", "p.log")
	if _, err := Start(context.Background(), c); err == nil {
		t.Error("Start with a log in a missing directory succeeded")
	}
}
