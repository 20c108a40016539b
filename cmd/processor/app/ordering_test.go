package app

import (
	"log/slog"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/transform"
)

// PROCESSOR_ORDERING reaches the pipeline's options.
func TestPipelineOptionsOrdering(t *testing.T) {
	for _, ordering := range []string{"partition", "key"} {
		for k, v := range map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out", "ORDERING": ordering} {
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
		want := pipeline.Ordering(ordering)
		if got := pipelineOptions(cfg, chains, nil, slog.New(slog.DiscardHandler), Overrides{}).Ordering; got != want {
			t.Errorf("PROCESSOR_ORDERING=%q: Options.Ordering %q, want %q", ordering, got, want)
		}
		for _, c := range chains {
			c.Close()
		}
	}
}
