package app

import (
	"errors"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// A chain that asks to run more records of a partition at once than there
// are workers (the http transform's MAX_IN_FLIGHT) gets as many chains
// under key ordering, whatever PROCESSOR_WORKERS says; partition ordering
// is refused for it with one line naming both variables; MAX_IN_FLIGHT=1
// changes nothing.
func TestInFlightChains(t *testing.T) {
	for _, c := range []struct {
		ordering, inFlight string
		workers, want      int
		err                string
	}{
		{"key", "8", 2, 8, ""},
		{"key", "8", 12, 12, ""},
		{"key", "1", 2, 2, ""},
		{"partition", "1", 3, 3, ""},
		{"partition", "8", 2, 0, `PROCESSOR_ORDERING="partition" is invalid: want key for this chain: http runs up to 8 records of a partition at once (PROCESSOR_HTTP_MAX_IN_FLIGHT=8), and partition ordering runs them one at a time, in offset order; key ordering keeps each key's records in order`},
	} {
		clearProcessorVars(t)
		for k, v := range map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out",
			"TRANSFORMS": "http", "HTTP_URL": `"http://127.0.0.1:1/"`, "HTTP_MAX_IN_FLIGHT": c.inFlight, "ORDERING": c.ordering} {
			t.Setenv(config.EnvName(k), v)
		}
		cfg, err := config.Load("h")
		if err != nil {
			t.Fatal(err)
		}
		chains, err := buildChains(transform.Default, cfg, c.workers)
		for _, ch := range chains {
			ch.Close()
		}
		var se *settings.Error
		switch {
		case c.err != "" && (!errors.As(err, &se) || err.Error() != c.err):
			t.Errorf("%+v: error %v, want the setting error %s", c, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case c.err == "" && len(chains) != c.want:
			t.Errorf("%+v: %d chains, want %d", c, len(chains), c.want)
		}
	}
}

// No setting of a registered transform, without an alias, is a core
// setting's variable: PROCESSOR_HTTP_ADDR and PROCESSOR_HTTP_TOKEN_FILE
// belong to the processor, whatever the http transform declares.
func TestTransformVarsAreNotCoreVars(t *testing.T) {
	core := map[string]bool{}
	for _, v := range config.Vars() {
		core[v] = true
	}
	if !core["PROCESSOR_HTTP_ADDR"] || !core["PROCESSOR_HTTP_TOKEN_FILE"] {
		t.Fatal("PROCESSOR_HTTP_ADDR or PROCESSOR_HTTP_TOKEN_FILE is not a core variable")
	}
	for _, name := range transform.Default.Names() {
		spec, _ := transform.Default.Lookup(name)
		for _, f := range spec.Fields() {
			if v := PluginVar(settings.Plugin{Kind: "transform", Name: name}, f.Name); core[v] {
				t.Errorf("transform %s declares %s, whose variable %s is a core setting", name, f.Name, v)
			}
		}
	}
}
