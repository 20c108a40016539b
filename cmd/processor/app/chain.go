package app

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/streamproc/processor/config"
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
// its errors naming settings by their variables (SettingNames).
// On an error it returns the chains it built, for the caller to close.
func buildChains(reg *transform.Registry, cfg *config.Config, n int) ([]*transform.Chain, error) {
	var chains []*transform.Chain
	for range n {
		c, err := buildChain(reg, cfg.Transforms, transform.MaxOutputBytes(int64(cfg.MaxOutputBytesPerRecord)), transform.WithNames(SettingNames()))
		if err != nil {
			return chains, err
		}
		chains = append(chains, c)
	}
	return chains, nil
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
