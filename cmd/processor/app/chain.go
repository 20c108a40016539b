package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/transform"
)

// buildChain builds the transform chain, reading each transform's settings
// from PROCESSOR_<NAME>[_<ALIAS>]_*. Every error names a variable.
func buildChain(reg *transform.Registry, names []string) (*transform.Chain, error) {
	entries := make([]transform.Entry, 0, len(names))
	for _, n := range names {
		e, err := transform.ParseEntry(n)
		if err != nil {
			return nil, &config.Error{Var: config.EnvName("TRANSFORMS"), Value: strings.Join(names, ","),
				Want: "comma-separated transform names, name@alias to use one twice: " + err.Error()}
		}
		entries = append(entries, e)
	}
	var cur transform.Entry // the entry being built, for errors
	chain, err := reg.Build(entries, func(e transform.Entry, settings any) error {
		cur = e
		return config.Process(config.TransformPrefix(e.Name, e.Alias), settings)
	})
	if err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			// A constructor names its settings without the alias it does
			// not know; name the variable the user must change.
			if rest, ok := strings.CutPrefix(cerr.Var, config.TransformPrefix(cur.Name, "")+"_"); ok && cur.Alias != "" &&
				!strings.HasPrefix(cerr.Var, config.TransformPrefix(cur.Name, cur.Alias)+"_") {
				cerr.Var = config.TransformPrefix(cur.Name, cur.Alias) + "_" + rest
				return nil, fmt.Errorf("transform %s: %w", cur, cerr) // the wrapped message was formatted before
			}
			return nil, err
		}
		var unknown *transform.UnknownError
		if errors.As(err, &unknown) {
			return nil, &config.Error{Var: config.EnvName("TRANSFORMS"), Value: strings.Join(names, ","),
				Want: "registered transform names; " + unknown.Error()}
		}
		return nil, fmt.Errorf("PROCESSOR_TRANSFORMS=%q: %w", strings.Join(names, ","), err)
	}
	return chain, nil
}

// warnUnknownVars logs PROCESSOR_* variables that nothing reads, which are
// usually typos (PROCESSOR_COMIT_INTERVAL) or settings of a transform that
// is not in the chain.
func warnUnknownVars(log *slog.Logger, chain []string) {
	known := map[string]bool{}
	for _, v := range config.Vars() {
		known[v] = true
	}
	var prefixes []string
	for _, entry := range chain {
		if e, err := transform.ParseEntry(entry); err == nil {
			prefixes = append(prefixes, config.TransformPrefix(e.Name, e.Alias)+"_")
		}
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, config.Prefix+"_") || known[name] || strings.HasPrefix(name, config.Prefix+"_TEST_") {
			continue
		}
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			log.Warn("ignoring an unknown variable: not a processor setting, nor a setting of a transform in PROCESSOR_TRANSFORMS", "var", name)
		}
	}
}
