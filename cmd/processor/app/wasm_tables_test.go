package app

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/testkit/wasmtest"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/join"
	_ "github.com/streamproc/processor/transform/wasm"
)

// A wasm stage's tables (PROCESSOR_WASM_TABLES) and a join stage's table
// are one set of tables to the wiring: a topic both read is kept one
// way, and a wasm stage reading it in the other mode is refused at
// Prepare, naming PROCESSOR_WASM_TABLE_MODE (checkJoins).
func TestPrepareWasmTables(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly guest")
	}
	module := filepath.Join(t.TempDir(), "enrichjoin.wasm")
	if err := wasmtest.Build("../../../examples/wasm/enrichjoin", module, "-buildmode=c-shared"); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out",
		"TRANSFORMS": "join,wasm", "JOIN_TABLE": "products", "JOIN_INTO": ".p", "JOIN_MODE": "global",
		"WASM_MODULE": module, "WASM_TIMEOUT": "1s", "WASM_TABLES": "customers,products"}
	for _, c := range []struct{ mode, want string }{
		{"global", ""},
		{"co_partitioned", `PROCESSOR_WASM_TABLE_MODE="co_partitioned" is invalid: want the mode of the other stage reading table products: a table is kept one way`},
	} {
		for k, v := range base {
			t.Setenv(config.EnvName(k), v)
		}
		t.Setenv(config.EnvName("WASM_TABLE_MODE"), c.mode)
		cfg, err := config.Load("h")
		if err != nil {
			t.Fatal(err)
		}
		chains, err := buildChains(transform.Default, cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		var topics []string
		for _, j := range chains[0].Joins() {
			for _, r := range j.Joiner.JoinTables() {
				topics = append(topics, r.Topic)
			}
		}
		if strings.Join(topics, ",") != "products,customers,products" {
			t.Errorf("the chain reads tables %v", topics)
		}
		_, err = Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{})
		chains[0].Close()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("TABLE_MODE=%s: got %v, want %q", c.mode, err, c.want)
		}
	}
}
