package binaries

import (
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/all" // what the binary registers
)

// Bad configuration exits 2 with one line naming the variable, and no
// stack trace.
func TestBinaryBadConfigExits2(t *testing.T) {
	t.Parallel()
	bin := itest.Binary(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0") // a port in use
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		env  []string
		want string
	}{
		{[]string{"PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out"}, "PROCESSOR_BROKERS is not set"},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out", "PROCESSOR_COMMIT_INTERVAL=soon"}, `PROCESSOR_COMMIT_INTERVAL="soon" is invalid`},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out", "PROCESSOR_TRANSFORMS=identity,nope"}, `unknown transform "nope" (known: ` + strings.Join(transform.Default.Names(), ", ") + ")"},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out", "PROCESSOR_TRANSACTION_TIMEOUT=50s"}, "PROCESSOR_TRANSACTION_TIMEOUT"},
		// A transform's own setting, through an alias: the message names the aliased variable.
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out",
			"PROCESSOR_TRANSFORMS=jq,jq@second", "PROCESSOR_JQ_EXPR=.", "PROCESSOR_JQ_SECOND_EXPR=.a |"}, `PROCESSOR_JQ_SECOND_EXPR=".a |" is invalid`},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out",
			"PROCESSOR_TRANSFORMS=wasm", "PROCESSOR_WASM_MODULE=/nonexistent.wasm"}, "PROCESSOR_WASM_MODULE"},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out",
			"PROCESSOR_HTTP_ADDR=" + busy.Addr().String()}, `PROCESSOR_HTTP_ADDR="` + busy.Addr().String() + `" is invalid: want a free host:port`},
		// Topics that overlap: dead letters into the output, a fixed route
		// destination that is an input or the dead-letter topic.
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out",
			"PROCESSOR_ON_ERROR=dlq", "PROCESSOR_DLQ_TOPIC=out"}, `PROCESSOR_DLQ_TOPIC="out" is invalid: want a topic other than PROCESSOR_OUTPUT_TOPIC`},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in,in2", "PROCESSOR_OUTPUT_TOPIC=out",
			"PROCESSOR_TRANSFORMS=route", "PROCESSOR_ROUTE_HEADER=to", "PROCESSOR_ROUTE_DEFAULT=in2"}, `PROCESSOR_ROUTE_DEFAULT="in2" is invalid: want a topic that is not also in PROCESSOR_INPUT_TOPICS`},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_OUTPUT_TOPIC=out",
			"PROCESSOR_ON_ERROR=dlq", "PROCESSOR_DLQ_TOPIC=dead",
			"PROCESSOR_TRANSFORMS=route@eu", "PROCESSOR_ROUTE_EU_HEADER=to", "PROCESSOR_ROUTE_EU_DEFAULT=dead"}, `PROCESSOR_ROUTE_EU_DEFAULT="dead" is invalid: want a topic other than PROCESSOR_DLQ_TOPIC`},
		// The postgres sink's settings, found before anything connects; the
		// URL's password is never shown.
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_SINK=postgres",
			"PROCESSOR_POSTGRES_URL=postgres://u:s3cret-pw@db:port/x"}, "PROCESSOR_POSTGRES_URL="},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_SINK=postgres",
			"PROCESSOR_POSTGRES_URL=postgres://u:s3cret-pw@127.0.0.1:1/x", "PROCESSOR_POSTGRES_STATEMENT=INSERT INTO t VALUES (@nope)"}, "PROCESSOR_POSTGRES_STATEMENT="},
		{[]string{"PROCESSOR_BROKERS=k:9092", "PROCESSOR_GROUP=g", "PROCESSOR_INPUT_TOPICS=in", "PROCESSOR_SINK=postgres",
			"PROCESSOR_POSTGRES_URL=postgres://u@127.0.0.1:1/x", "PROCESSOR_POSTGRES_PASSWORD_FILE=/nonexistent/pw"}, `PROCESSOR_POSTGRES_PASSWORD_FILE="/nonexistent/pw" is invalid`},
	}
	for _, c := range cases {
		if msg := itest.RunBadConfig(t, bin, c.env...); !strings.Contains(msg, c.want) || strings.Contains(msg, "goroutine") || strings.Contains(msg, "s3cret") {
			t.Errorf("%v: stderr %q, want one line containing %q", c.env, msg, c.want)
		}
	}
}

// The binary on its embedded broker becomes ready, commits transactions for
// loadgen's input with three workers, serves metrics and /status, and
// exits 0 on SIGTERM.
func TestBinaryEmbeddedBrokerRunAndSIGTERM(t *testing.T) {
	t.Parallel()
	broker, httpAddr := itest.FreeAddr(t), itest.FreeAddr(t)
	p := itest.RunBinary(t, "processor", launch.Instance{
		EmbeddedBroker:    broker,
		EmbeddedBrokerDir: t.TempDir(),
		Group:             "bin-demo",
		InputTopics:       []string{"orders"},
		OutputTopic:       "orders-out",
		HTTPAddr:          httpAddr,
		ProgressInterval:  200 * time.Millisecond,
		Workers:           3,
	})
	logs := p.Logs

	get := func(path string) (int, string) { return itest.HTTPGet(httpAddr, path) }
	itest.WaitFor(t, 30*time.Second, "/readyz to answer 200", func() bool { code, _ := get("/readyz"); return code == 200 })
	if code, body := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d %q", code, body)
	}

	runLoadgen(t, broker, "-records", "2000", "-rate", "0")
	// The counters of one scrape: a commit adds to the consumed one before
	// the produced one, and a scrape may fall between.
	var metrics string
	itest.WaitFor(t, 30*time.Second, "2000 records to commit", func() bool {
		_, metrics = get("/metrics")
		return strings.Contains(metrics, "processor_records_consumed_total 2000") &&
			strings.Contains(metrics, `processor_records_produced_total{topic="orders-out"} 2000`)
	})
	for _, m := range []string{"processor_transactions_committed_total", `processor_records_produced_total{topic="orders-out"} 2000`,
		"processor_transaction_duration_seconds_bucket", "processor_kafka_"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	if _, body := get("/status"); !strings.Contains(body, `"workers": 3,`) {
		t.Errorf("/status does not say 3 workers: %s", body)
	}
	if !strings.Contains(logs.String(), `"workers":3,`) {
		t.Error(`the "processor starting" line does not say 3 workers`)
	}
	itest.WaitFor(t, 10*time.Second, "a progress line", func() bool { return strings.Contains(logs.String(), `"msg":"progress"`) })

	start := time.Now()
	p.Terminate(t)
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(logs.String(), "processor stopped cleanly") {
		t.Error("the log lacks the clean-stop line")
	}
}

// An unreachable broker at start is no crash loop: the processor retries
// with backoff, says so plainly, answers /readyz with 503 and /healthz with
// 200, and still stops cleanly on SIGTERM.
func TestBinaryUnreachableBroker(t *testing.T) {
	t.Parallel()
	httpAddr := itest.FreeAddr(t)
	p := itest.RunBinary(t, "processor", launch.Instance{
		Brokers:     []string{itest.FreeAddr(t)}, // nothing listens there
		Group:       "unreachable",
		InputTopics: []string{"in"},
		OutputTopic: "out",
		HTTPAddr:    httpAddr,
	})
	logs := p.Logs
	status := func(path string) int {
		resp, err := itest.BinaryHTTP.Get("http://" + httpAddr + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	itest.WaitFor(t, 30*time.Second, "a plain retry message", func() bool {
		return strings.Contains(logs.String(), "cannot initialise the transactional producer; retrying")
	})
	if code := status("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d, want 503", code)
	}
	if code := status("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200 while waiting for the brokers", code)
	}
	select {
	case <-p.Done:
		t.Fatalf("exited while the broker was unreachable: %v", p.Err)
	default:
	}
	if strings.Contains(logs.String(), "goroutine ") {
		t.Error("the log has a stack trace")
	}
	p.Terminate(t)
}

// A missing output or dead-letter topic is a configuration error found at
// start (exit 2, naming the variable), not a loop of aborted transactions.
func TestBinaryMissingTopicExits2(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out, dlq, group := itest.Unique("missing-in"), itest.Unique("missing-out"), itest.Unique("missing-dlq"), itest.Unique("missing-group")
		tg.NewTopics(t, 1, in, out)
		for _, c := range []struct {
			name, want string
			set        func(*launch.Instance)
		}{
			{"output", "PROCESSOR_OUTPUT_TOPIC", func(*launch.Instance) {}},
			{"dlq", "PROCESSOR_DLQ_TOPIC", func(inst *launch.Instance) { inst.OnError, inst.DLQTopic = "dlq", dlq }},
		} {
			target := out
			if c.name == "output" {
				target = itest.Unique("never-created")
			}
			p := tg.StartBinary(t, group, group+"-"+c.name, in, target, c.set)
			select {
			case <-p.Done:
			case <-time.After(60 * time.Second):
				t.Fatalf("%s: still running with a missing topic", c.name)
			}
			var ee *exec.ExitError
			if !errors.As(p.Err, &ee) || ee.ExitCode() != 2 || !strings.Contains(p.Logs.String(), c.want) {
				t.Errorf("%s: exit %v, log %q; want exit 2 naming %s", c.name, p.Err, p.Logs.String(), c.want)
			}
		}
	})
}
