package app

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
)

// trySamples feed both try and the processor: outputs, one input made
// into two, a filtered one, one routed by a header, one without a key,
// one that fails (its dead letter keeps its headers), one whose value is
// not UTF-8 and so not JSON either.
const trySamples = `{"key":"a","value":"{\"n\":1}","headers":{"trace":"t1"}}
{"key":"b","value":"{\"split\":true,\"a\":\"x\",\"b\":\"y\"}"}
{"key":"c","value":"{\"drop\":true}"}
{"key":"d","value":"{\"n\":4}","headers":[{"key":"dest","value":"try-routed"},{"key":"dest","value":"ignored"}]}
{"value":"{\"n\":5}"}
{"key":"f","value":"not json","headers":{"trace":"t6"}}
{"key":"g","value_base64":"/w=="}
`

// try's output for a file equals what the processor writes through Kafka
// for the same records: the samples are produced to a kfake topic, the
// processor (Prepare and Build, as Main builds it) runs the same configuration
// on it, and its committed outputs and dead letters, by the input their
// lineage names, equal try's lines: topic, key, value and headers.
func TestTryEqualsTheProcessor(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "try-in", "try-out", "try-routed", "try-dlq"))
	env := map[string]string{"BROKERS": c.Brokers[0], "GROUP": "try-eq", "INPUT_TOPICS": "try-in", "OUTPUT_TOPIC": "try-out",
		"TRANSACTIONAL_ID": "try-eq-1", "COMMIT_INTERVAL": "50ms", "ON_ERROR": "dlq", "DLQ_TOPIC": "try-dlq",
		"TRANSFORMS": "jq,route", "JQ_EXPR": "if .drop then empty elif .split then (.a, .b) else . end",
		"ROUTE_HEADER": "dest", "ROUTE_DEFAULT": "try-out", "LOG_LEVEL": "error"}
	lines, stderr, code := tryRun(t, transform.Default, env, trySamples, "-topics", "try-in,try-out,try-routed,try-dlq")
	if code != exitRuntime || len(lines) != 7 {
		t.Fatalf("try: exit %d with %d lines, want 1 (a dead letter) and 7; stderr %s", code, len(lines), stderr)
	}
	want := map[record.Source][]tryRecord{}
	for _, l := range lines {
		src := record.Source{Topic: l.Source.Topic, Partition: l.Source.Partition, Offset: l.Source.Offset}
		want[src] = l.Outputs
		if l.DeadLetter != nil {
			want[src] = append(want[src], l.DeadLetter.Record)
		}
	}

	recs, err := readSamples(strings.NewReader(trySamples), "json", "try-in")
	if err != nil {
		t.Fatal(err)
	}
	c.ProduceSync(t, recs)
	cfg, err := config.Load("h")
	if err != nil {
		t.Fatal(err)
	}
	runProcessorUntil(t, cfg, func() bool { ok, _ := c.CaughtUp(t, cfg.Group, "try-in"); return ok })
	got := map[record.Source][]tryRecord{}
	for _, topic := range []string{"try-out", "try-routed", "try-dlq"} {
		for _, r := range c.ReadAll(t, topic, true) {
			src, ok := record.Lineage(r.Headers)
			if !ok {
				t.Fatalf("an output of %s without lineage: %v", topic, r.Headers)
			}
			got[src] = append(got[src], newTryRecord(r))
		}
	}
	for src, w := range want {
		g := got[src]
		byTopic := func(a, b tryRecord) int { return strings.Compare(a.Topic, b.Topic) }
		slices.SortStableFunc(g, byTopic)
		slices.SortStableFunc(w, byTopic)
		if asJSON(g) != asJSON(w) {
			t.Errorf("input %v: the processor wrote\n%s\ntry printed\n%s", src, asJSON(g), asJSON(w))
		}
		delete(got, src)
	}
	if len(got) > 0 {
		t.Errorf("the processor wrote outputs of inputs try does not know: %s", asJSON(got))
	}
}

// runProcessorUntil runs the processor of cfg, built as Main builds it,
// until done, and stops it.
func runProcessorUntil(t *testing.T, cfg *config.Config, done func() bool) {
	t.Helper()
	chains, err := buildChains(transform.Default, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer chains[0].Close()
	log := slog.New(slog.DiscardHandler)
	pr, err := Prepare(cfg, chains, log, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := pr.Build(cfg.Brokers, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, in, done)
}

// runUntil runs the instance in until done, and stops it.
func runUntil(t *testing.T, in *Instance, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- in.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		select {
		case err := <-ran:
			t.Fatalf("Run = %v before the inputs were committed", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the inputs not committed after 30s")
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
