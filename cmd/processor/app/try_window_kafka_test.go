package app

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/transform"
)

// try's closed windows and late records equal what the processor writes
// through Kafka for the same records: an aggregate count by key in 10s
// tumbling windows with 2s of grace and EMIT=close, late records to a
// late topic. The processor (Prepare and build with its state store on kfake,
// as Main opens it) drains the samples, which it polls in batches of its
// own; its committed outputs and late records, as a set, equal the
// closed records and outputs try printed, one input per transaction.
func TestTryWindowsEqualTheProcessor(t *testing.T) {
	c := kafkatest.NewFake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "tw-in", "tw-out", "tw-late"))
	env := map[string]string{"BROKERS": c.Brokers[0], "GROUP": "try-windows", "INPUT_TOPICS": "tw-in", "OUTPUT_TOPIC": "tw-out",
		"TRANSACTIONAL_ID": "try-windows-1", "COMMIT_INTERVAL": "50ms", "TRANSFORMS": "aggregate",
		"AGGREGATE_WINDOW": "10s", "AGGREGATE_GRACE": "2s", "AGGREGATE_EMIT": "close", "LATE_TOPIC": "tw-late",
		"STATE_DIR": t.TempDir(), "LOG_LEVEL": "error"}
	var samples strings.Builder
	for i, ms := range []int64{1000, 5000, 9000, 11000, 12000, 9500, 15000, 21000, 3000, 25000, 29000, 32000} {
		key := string(rune('a' + i%3))
		samples.WriteString(`{"key":"` + key + `","value":"{}","timestamp":` + strconv.FormatInt(ms, 10) + "}\n")
	}
	lines, stderr, code := tryRun(t, transform.Default, env, samples.String())
	if code != exitOK {
		t.Fatalf("try: exit %d; stderr %s", code, stderr)
	}
	var want []string
	late := 0
	for _, l := range lines {
		for _, r := range append(l.Closed, l.Outputs...) {
			want = append(want, asJSON(r))
		}
		if l.Late {
			late++
		}
	}
	if late == 0 || len(want) <= late {
		t.Fatalf("try printed %d records, %d late: want windows closed and late inputs", len(want), late)
	}

	recs, err := readSamples(strings.NewReader(samples.String()), "json", "tw-in")
	if err != nil {
		t.Fatal(err)
	}
	c.ProduceSync(t, recs)
	cfg, err := config.Load("h")
	if err != nil {
		t.Fatal(err)
	}
	runStatefulUntil(t, cfg, func() bool { ok, _ := c.CaughtUp(t, cfg.Group, "tw-in"); return ok })
	var got []string
	for _, topic := range []string{"tw-out", "tw-late"} {
		for _, r := range c.ReadAll(t, topic, true) {
			got = append(got, asJSON(newTryRecord(r)))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the processor wrote\n%s\ntry printed\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// runStatefulUntil is runProcessorUntil for a chain with state: the
// store opened as Main opens it (openState), with its changelogs.
func runStatefulUntil(t *testing.T, cfg *config.Config, done func() bool) {
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
	promReg := prometheus.NewRegistry()
	st, err := openState(context.Background(), cfg, pr.sec, cfg.Brokers, chains[0], promReg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	in, err := pr.build(cfg.Brokers, promReg, reached{state: st})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, in, done)
}
