package app

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/streamproc/processor/internal/kafkatest"
	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/txn"
)

// kafkaMetrics forwards every hook kprom implements: a hook it lacked would
// silently drop those metrics (franz-go finds hooks by type assertion).
func TestKafkaMetricsHooks(t *testing.T) {
	kp, ours := reflect.ValueOf(new(kprom.Metrics)), reflect.ValueOf(newKafkaMetrics(prometheus.NewRegistry()))
	for i := range kp.NumMethod() {
		name := kp.Type().Method(i).Name
		if !strings.HasPrefix(name, "On") {
			continue
		}
		m := ours.MethodByName(name)
		if !m.IsValid() {
			t.Errorf("kafkaMetrics has no %s, which kprom.Metrics has", name)
			continue
		}
		if want, got := kp.Method(i).Type(), m.Type(); got != want {
			t.Errorf("kafkaMetrics.%s is %s, kprom.Metrics's is %s", name, got, want)
		}
	}
}

// One hook serves client after client, as a txn.Session rebuilds its
// client: each open client's metrics are registered (a second registration
// would panic) and unregistered when it closes.
func TestKafkaMetricsAcrossClients(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	reg := prometheus.NewRegistry()
	hook := newKafkaMetrics(reg)
	kafkaFamilies := func() []string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "processor_kafka_") {
				names = append(names, mf.GetName())
			}
		}
		return names
	}
	for i := range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.WithHooks(hook))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
		cancel()
		if err != nil {
			cl.Close()
			t.Fatalf("client %d: producing: %v", i, err)
		}
		names := kafkaFamilies()
		cl.Close()
		if !strings.Contains(strings.Join(names, " "), "processor_kafka_connects_total") {
			t.Errorf("client %d: registered families %v, want processor_kafka_connects_total among them", i, names)
		}
		if left := kafkaFamilies(); len(left) != 0 {
			t.Errorf("client %d: still registered after it closed: %v", i, left)
		}
	}
}

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

// What /metrics serves passes promtool check metrics without a word: the
// registry Main builds (runtime, process, build info, readiness), the
// transaction, pipeline and PostgreSQL metrics with a child in every
// vector, and a Kafka client's kprom metrics after it has produced and
// fetched, so that its per-broker and per-topic series exist.
func TestMetricsLint(t *testing.T) {
	bin := promtool(t)
	rec := &recorder{Registry: newRegistry()}
	registerReady(rec, func() string { return "" })
	txn.NewMetrics(rec)
	pipeline.NewMetrics(rec)
	pgsink.NewMetrics(rec)

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
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"processor_ready 1", "processor_kafka_request_duration_e2e_seconds_bucket{", "processor_kafka_fetch_bytes_total{",
		"processor_kafka_buffered_fetch_records ", "processor_transactions_committed_total ", "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	cmd := exec.CommandContext(ctx, bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
