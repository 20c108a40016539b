package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

// promtool returns the path of promtool. Without it the test is skipped,
// except under CI, which must install it (as go test ./deploy/ does).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatal("promtool not found, and CI is set: CI must install it (apt-get install -y prometheus)")
	}
	t.Skip("promtool not found: install the Debian package prometheus (apt-get install -y prometheus) to lint /metrics")
	return ""
}

// scrape GETs path from the endpoints served at ln.
func scrape(t *testing.T, ln net.Listener, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + ln.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// lintMetrics fails unless promtool check metrics says nothing about
// body, and body has every one of want.
func lintMetrics(t *testing.T, bin, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics has no %s", w)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// What /metrics serves passes promtool check metrics without a word: the
// registry Main builds (runtime, process, build info, readiness), the
// transaction and pipeline metrics and every registered sink's, with a
// child in every vector, and a Kafka client's kprom metrics after it has
// produced and fetched, so that its per-broker and per-topic series
// exist.
func TestMetricsLint(t *testing.T) {
	bin := promtool(t)
	rec := &recorder{Registry: newRegistry()}
	registerReady(rec, func() string { return "" })
	txn.NewMetrics(rec)
	pipeline.NewMetrics(rec)
	registerSinkMetrics(rec)

	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.ConsumeTopics("t"), kgo.WithHooks(newKafkaMetrics(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
	if fs := cl.PollFetches(ctx); fs.NumRecords() == 0 {
		t.Fatalf("fetched no record: %v", fs.Errors())
	}
	familyTypes(rec) // a child in every vector

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(ln, rec.Registry, &endpoints{})
	defer srv.Close()
	lintMetrics(t, bin, scrape(t, ln, "/metrics"), "processor_ready 1", "processor_kafka_request_duration_e2e_seconds_bucket{",
		"processor_kafka_fetch_bytes_total{", "processor_kafka_buffered_fetch_records ", "processor_transform_errors_total{",
		"go_goroutines ", "process_start_time_seconds ")
}

// The same of a processor built and served as Main does it, on the kafka
// sink, once it is ready and has committed its input.
func TestMetricsLintRunning(t *testing.T) {
	bin := promtool(t)
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "in"), kfake.SeedTopics(1, "out"))
	for k, v := range map[string]string{"BROKERS": c.Brokers[0], "GROUP": "lint", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out",
		"COMMIT_INTERVAL": "50ms", "TRANSACTIONAL_ID": "lint-1"} {
		t.Setenv(config.EnvName(k), v)
	}
	cfg, err := config.Load("h")
	if err != nil {
		t.Fatal(err)
	}
	chains, err := buildChains(transform.Default, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	promReg := newRegistry()
	ep := newEndpoints(cfg, chains[0], len(chains))
	registerReady(promReg, ep.ready)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTP(ln, promReg, ep)
	defer srv.Close()
	lintMetrics(t, bin, scrape(t, ln, "/metrics"), "processor_ready 0", "processor_build_info{")

	in, err := pr.Build(cfg.Brokers, nil, promReg)
	if err != nil {
		t.Fatal(err)
	}
	ep.run(in.Pipeline)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- in.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	produceInputs(t, c, 0, 100)
	// One scrape that has both counters at 100: a commit adds to the
	// consumed one before the produced one, and a scrape may fall between.
	deadline := time.Now().Add(30 * time.Second)
	body := ""
	for !strings.Contains(body, "processor_records_consumed_total 100") || !strings.Contains(body, `processor_records_produced_total{topic="out"} 100`) ||
		!strings.Contains(body, "processor_ready 1") {
		if time.Now().After(deadline) {
			t.Fatalf("not ready with 100 records committed and produced after 30s:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
		body = scrape(t, ln, "/metrics")
	}
	lintMetrics(t, bin, body, "processor_ready 1", `processor_records_produced_total{topic="out"} 100`,
		"processor_consumer_lag_records{", "processor_kafka_request_duration_e2e_seconds_bucket{", "processor_kafka_produce_bytes_total{",
		"processor_kafka_buffered_produce_records ", "processor_transactions_committed_total ")
}
