package app

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
)

// buildChain builds the transform chain, each entry's settings read from
// PROCESSOR_<NAME>[_<ALIAS>]_<SETTING>, with opts for the whole chain.
// Every error names a variable.
func buildChain(reg *transform.Registry, names []string, opts ...transform.BuildOption) (*transform.Chain, error) {
	entries, err := parseEntries(names)
	if err != nil {
		return nil, err
	}
	chain, err := reg.Build(entries, func(e transform.Entry, setting string) (string, bool) {
		return envLookup(e.Plugin())(setting)
	}, opts...)
	if err != nil {
		var se *settings.Error
		if errors.As(err, &se) {
			return nil, settingError(se)
		}
		var unknown *transform.UnknownError
		if errors.As(err, &unknown) {
			return nil, &settings.Error{Var: config.EnvName("TRANSFORMS"), Value: strings.Join(names, ","),
				Want: settings.Say("registered transform names; " + unknown.Error())}
		}
		return nil, fmt.Errorf("PROCESSOR_TRANSFORMS=%q: %w", strings.Join(names, ","), err)
	}
	return chain, nil
}

// buildChains builds n chains alike (buildChain), one per worker, each
// bounding one record's outputs by PROCESSOR_MAX_OUTPUT_BYTES_PER_RECORD,
// its errors naming settings by their variables (SettingNames). A chain
// that asks to run more records of a partition at once than n
// (transform.Chain.InFlight: they wait on a service, not on a CPU) gets
// as many chains under PROCESSOR_ORDERING=key, and is refused under
// partition ordering, which runs a partition's records one at a time.
// On an error it returns the chains it built, for the caller to close.
func buildChains(reg *transform.Registry, cfg *config.Config, n int) ([]*transform.Chain, error) {
	var chains []*transform.Chain
	for i := 0; i < n; i++ {
		c, err := buildChain(reg, cfg.Transforms, transform.MaxOutputBytes(int64(cfg.MaxOutputBytesPerRecord)), transform.WithNames(SettingNames()))
		if err != nil {
			return chains, err
		}
		chains = append(chains, c)
		if i > 0 {
			continue
		}
		if m, e := c.InFlight(); m > 1 {
			if cfg.Ordering != string(pipeline.OrderKey) {
				return chains, inFlightError(reg, cfg, m, e)
			}
			n = max(n, m)
		}
	}
	return chains, nil
}

// inFlightError refuses partition ordering for a chain whose entry e
// asks to run m records of a partition at once.
func inFlightError(reg *transform.Registry, cfg *config.Config, m int, e transform.Entry) error {
	what := fmt.Sprintf("%s runs up to %d records of a partition at once", e, m)
	if spec, ok := reg.Lookup(e.Name); ok {
		for _, f := range spec.Fields() {
			if f.Name == "MAX_IN_FLIGHT" {
				what += " (" + PluginVar(e.Plugin(), f.Name) + fmt.Sprintf("=%d)", m)
			}
		}
	}
	return &settings.Error{Var: config.EnvName("ORDERING"), Value: cfg.Ordering,
		Want: settings.Say("key for this chain: " + what + ", and partition ordering runs them one at a time, in offset order; key ordering keeps each key's records in order")}
}

// workers is PROCESSOR_WORKERS, with 0 meaning one per CPU the Go runtime
// uses.
func workers(cfg *config.Config) int {
	if cfg.Workers > 0 {
		return cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// parseEntries parses PROCESSOR_TRANSFORMS.
func parseEntries(names []string) ([]transform.Entry, error) {
	entries := make([]transform.Entry, 0, len(names))
	for _, n := range names {
		e, err := transform.ParseEntry(n)
		if err != nil {
			return nil, &settings.Error{Var: config.EnvName("TRANSFORMS"), Value: strings.Join(names, ","),
				Want: settings.Say("comma-separated transform names, name@alias to use one twice: " + err.Error())}
		}
		entries = append(entries, e)
	}
	return entries, nil
}
