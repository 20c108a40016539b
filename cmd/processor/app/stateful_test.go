package app

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/aggregate"
	_ "github.com/streamproc/processor/transform/dedupe"
	_ "github.com/streamproc/processor/transform/headers"
)

// Prepare refuses a stateful chain with at_least_once, a database sink,
// several input topics (unless every store is behind a repartition hop),
// a second hop, and key ordering when its state is not kept by the
// record key as it arrived nor behind a hop (the pipeline's rules,
// pipeline.StateError), each naming the variable; a chain without state
// takes them.
func TestPrepareRefusesStateful(t *testing.T) {
	base := map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out", "GUARANTEE": "exactly_once", "SINK": "kafka", "ORDERING": "partition"}
	for _, c := range []struct {
		name, transforms, key, value, want string
		extra                              map[string]string
	}{
		{"exactly once", "aggregate", "GUARANTEE", "exactly_once", "", nil},
		{"at least once", "aggregate", "GUARANTEE", "at_least_once", "PROCESSOR_GUARANTEE=\"at_least_once\" is invalid: want exactly_once with a stateful transform (stores aggregate): at least once, the state would count replayed inputs twice", nil},
		{"two inputs", "aggregate", "INPUT_TOPICS", "a,b", "PROCESSOR_INPUT_TOPICS", nil},
		{"no state", "identity", "GUARANTEE", "at_least_once", "", nil},
		{"key ordering by the key", "aggregate", "ORDERING", "key", "", nil},
		{"key ordering after headers", "headers,aggregate", "ORDERING", "key", "", map[string]string{"HEADERS_SET": "a=b"}},
		// Behind a repartition hop, BY is the key the records are dealt by.
		{"key ordering by BY", "aggregate", "ORDERING", "key", "", map[string]string{"AGGREGATE_BY": ".customer"}},
		{"dedupe by BY", "dedupe", "ORDERING", "key", "", map[string]string{"DEDUPE_BY": ".id"}},
		{"key ordering by BY, no hop", "aggregate", "ORDERING", "key",
			`PROCESSOR_ORDERING="key" is invalid: want partition for this chain: aggregate keeps state by something other than the record key`,
			map[string]string{"AGGREGATE_BY": ".customer", "AGGREGATE_PARTITIONED_BY_KEY": "true"}},
		{"BY, two inputs", "aggregate", "INPUT_TOPICS", "a,b", "", map[string]string{"AGGREGATE_BY": ".customer"}},
		{"state before the hop, two inputs", "dedupe,aggregate", "INPUT_TOPICS", "a,b", "PROCESSOR_INPUT_TOPICS", map[string]string{"AGGREGATE_BY": ".customer"}},
		{"BY, a database sink", "aggregate", "SINK", "postgres",
			`PROCESSOR_SINK="postgres" is invalid: want kafka with a stateful transform (stores aggregate): the chain repartitions its records through a Kafka topic`,
			map[string]string{"AGGREGATE_BY": ".customer", "POSTGRES_URL": "postgres://u@127.0.0.1:1/x"}},
		{"a second hop", "aggregate,aggregate@again", "GUARANTEE", "exactly_once",
			`PROCESSOR_TRANSFORMS="aggregate,aggregate@again" is invalid: want at most one repartition hop: aggregate@again keeps state after aggregate`,
			map[string]string{"AGGREGATE_BY": ".customer", "AGGREGATE_AGAIN_STORE": "again"}},
		{"a second stage declared", "aggregate,aggregate@again", "GUARANTEE", "exactly_once", "",
			map[string]string{"AGGREGATE_BY": ".customer", "AGGREGATE_AGAIN_STORE": "again", "AGGREGATE_AGAIN_PARTITIONED_BY_KEY": "true"}},
		{"BY under partition ordering", "aggregate", "ORDERING", "partition", "", map[string]string{"AGGREGATE_BY": ".customer"}},
		{"EMIT=close behind the hop", "aggregate", "GUARANTEE", "exactly_once", "",
			map[string]string{"AGGREGATE_BY": ".customer", "AGGREGATE_WINDOW": "1m", "AGGREGATE_EMIT": "close"}},
		{"EMIT=close behind the hop, a stage after it", "aggregate,jq", "GUARANTEE", "exactly_once", "",
			map[string]string{"AGGREGATE_BY": ".customer", "AGGREGATE_WINDOW": "1m", "AGGREGATE_EMIT": "close", "JQ_EXPR": "."}},
		{"EMIT=close, no hop", "aggregate", "GUARANTEE", "exactly_once", "",
			map[string]string{"AGGREGATE_BY": ".customer", "AGGREGATE_WINDOW": "1m", "AGGREGATE_EMIT": "close", "AGGREGATE_PARTITIONED_BY_KEY": "true"}},
	} {
		for k, v := range base {
			t.Setenv(config.EnvName(k), v)
		}
		t.Setenv(config.EnvName("TRANSFORMS"), c.transforms)
		t.Setenv(config.EnvName(c.key), c.value)
		for k, v := range c.extra {
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
		_, err = Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
		chains[0].Close()
		for k := range c.extra {
			os.Unsetenv(config.EnvName(k)) // t.Setenv restores it at the end
		}
	}
}

// A replay runs dead letters, which have no input partition: Prepare
// refuses a stateful chain for it naming PROCESSOR_TRANSFORMS, and takes
// the chain for the processor.
func TestPrepareRefusesStatefulReplay(t *testing.T) {
	for k, v := range map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out",
		"TRANSFORMS": "headers,aggregate", "HEADERS_SET": "a=b", "ON_ERROR": "dlq", "DLQ_TOPIC": "dlq"} {
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
	defer chains[0].Close()
	if _, err := Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{}); err != nil {
		t.Fatalf("Prepare for the processor: %v", err)
	}
	_, err = Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{Replay: true})
	want := `PROCESSOR_TRANSFORMS="headers" is invalid: want a chain without state: a stateful chain keeps its state by input partition, which dead letters do not have`
	var se *settings.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
		t.Errorf("Prepare for a replay = %v, want a *settings.Error saying %q", err, want)
	}
}

// processor try runs a stateful chain on a store in memory: each sample
// sees what the earlier ones committed.
func TestTryAggregateCounts(t *testing.T) {
	lines, stderr, code := tryRun(t, transform.Default, map[string]string{"TRANSFORMS": "aggregate"}, "a\tx\nb\tx\na\tx\n")
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
	}
	var got []string
	for _, l := range lines {
		for _, o := range l.Outputs {
			got = append(got, *o.Value)
		}
	}
	want := []string{`{"key":"a","value":1}`, `{"key":"b","value":1}`, `{"key":"a","value":2}`}
	if asJSON(got) != asJSON(want) {
		t.Errorf("got %s, want %s", asJSON(got), asJSON(want))
	}
}

// processor try counts by a field as the processor does behind its
// repartition hop: one aggregate per customer, whatever the record keys
// (one process sees every key, so it runs the whole chain at once).
func TestTryAggregateByField(t *testing.T) {
	lines, stderr, code := tryRun(t, transform.Default, map[string]string{"TRANSFORMS": "aggregate", "AGGREGATE_BY": ".c"},
		"o1\t{\"c\":\"a\"}\no2\t{\"c\":\"b\"}\no3\t{\"c\":\"a\"}\no4\t{\"c\":\"a\"}\n")
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
	}
	var got []string
	for _, l := range lines {
		for _, o := range l.Outputs {
			got = append(got, *o.Value)
		}
	}
	want := []string{`{"key":"a","value":1}`, `{"key":"b","value":1}`, `{"key":"a","value":2}`, `{"key":"a","value":3}`}
	if asJSON(got) != asJSON(want) {
		t.Errorf("got %s, want %s", asJSON(got), asJSON(want))
	}
}
