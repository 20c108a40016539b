package app

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/sink"
	"github.com/streamproc/processor/transform"
)

// Unknown PROCESSOR_* variables: nothing reads them, so they are almost
// always typos (PROCESSOR_COMIT_INTERVAL, PROCESSOR_AGGREGATE_WINDOWS)
// that would otherwise run the processor with a default the user meant to
// change. checkUnknownVars refuses them, naming the closest setting,
// unless PROCESSOR_ALLOW_UNKNOWN_VARIABLES=true. The settings of a
// registered transform that is not in the chain, and of a sink not
// chosen, are known: one environment may serve several chains, and
// only warn. PROCESSOR_TEST_* variables are the test harness's and
// PROCESSOR_PG_* those of the development PostgreSQL script
// (integration/postgres/pg.sh): both are ignored.

// unknownVarSuffix is how an unknown variable's error says how to run
// anyway.
var unknownVarSuffix = "(" + config.EnvName("ALLOW_UNKNOWN_VARIABLES") + "=true to run anyway)"

// knownVars are the variable names the processor reads with chain:
// used are the processor's, the sinks' and the chain's entries' own,
// idle the settings of registered transforms not in the chain. vague
// are the prefixes of chain entries that name no registered transform,
// whose error the chain's build gives.
func knownVars(reg *transform.Registry, chain []string) (used, idle map[string]bool, vague []string) {
	used, idle = map[string]bool{}, map[string]bool{}
	for _, v := range config.Vars() {
		used[v] = true
	}
	for _, name := range sink.Default.Names() {
		spec, _ := sink.Default.Lookup(name)
		for _, f := range spec.Fields() {
			used[sinkVar(name, f.Name)] = true
		}
	}
	for _, entry := range chain {
		e, err := transform.ParseEntry(entry)
		spec, ok := reg.Lookup(e.Name)
		if err != nil || !ok {
			vague = append(vague, config.EnvName(strings.ToUpper(strings.SplitN(entry, "@", 2)[0]))+"_")
			continue
		}
		for _, f := range spec.Fields() {
			used[PluginVar(e.Plugin(), f.Name)] = true
		}
	}
	for _, name := range reg.Names() {
		spec, _ := reg.Lookup(name)
		for _, f := range spec.Fields() {
			if v := config.EnvName(strings.ToUpper(name) + "_" + f.Name); !used[v] {
				idle[v] = true
			}
		}
	}
	return used, idle, vague
}

// checkUnknownVars returns the error of the first unknown PROCESSOR_*
// variable of the environment (by name), naming the closest known one;
// with allow it logs a warning for each instead. A setting of a
// transform not in the chain is logged.
func checkUnknownVars(log *slog.Logger, reg *transform.Registry, chain []string, allow bool) error {
	unknown, idle := findUnknownVars(reg, chain)
	for _, name := range idle {
		log.Warn("ignoring a setting of a transform that is not in PROCESSOR_TRANSFORMS", "var", name)
	}
	for _, msg := range unknown {
		if !allow {
			return fmt.Errorf("%s %s", msg, unknownVarSuffix)
		}
		log.Warn("ignoring an unknown variable: " + msg)
	}
	return nil
}

// findUnknownVars returns, sorted by name, what is wrong with each
// unknown PROCESSOR_* variable of the environment (unknownVarMessage),
// and the settings of registered transforms not in the chain that are
// set.
func findUnknownVars(reg *transform.Registry, chain []string) (unknown, idle []string) {
	used, idleVars, vague := knownVars(reg, chain)
	var names []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, config.Prefix+"_") && !used[name] && !harnessVar(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case idleVars[name]:
			idle = append(idle, name)
		case !slices.ContainsFunc(vague, func(p string) bool { return strings.HasPrefix(name, p) }):
			unknown = append(unknown, unknownVarMessage(name, used, idleVars))
		}
	}
	return unknown, idle
}

// withUnknownVars adds to the configuration error err the first unknown
// PROCESSOR_* variable, which is often its cause (PROCESSOR_GRUOP set,
// PROCESSOR_GROUP missing): the settings could not be loaded, so the
// chain and PROCESSOR_ALLOW_UNKNOWN_VARIABLES are read as they are.
func withUnknownVars(reg *transform.Registry, err error) error {
	env := config.Env(config.EnvName)
	if v, _ := env("ALLOW_UNKNOWN_VARIABLES"); isTrue(v) {
		return err
	}
	chain := []string{"identity"}
	if v, _ := env("TRANSFORMS"); v != "" {
		chain = strings.Split(v, ",")
		for i := range chain {
			chain[i] = strings.TrimSpace(chain[i])
		}
	}
	if unknown, _ := findUnknownVars(reg, chain); len(unknown) > 0 {
		return fmt.Errorf("%w; %s", err, unknown[0])
	}
	return err
}

// harnessVar reports whether name is a variable of the test harness or
// the development scripts, which are not the processor's.
func harnessVar(name string) bool {
	return strings.HasPrefix(name, config.Prefix+"_TEST_") || strings.HasPrefix(name, config.Prefix+"_PG_")
}

// unknownVarMessage says that name is not a setting, and which known
// variable it is closest to when one is close.
func unknownVarMessage(name string, used, idle map[string]bool) string {
	best, dist := "", -1
	for _, set := range []map[string]bool{used, idle} {
		for v := range set {
			d := editDistance(name, v)
			if dist < 0 || d < dist || (d == dist && v < best) {
				best, dist = v, d
			}
		}
	}
	msg := name + " is not a setting"
	suffix := strings.TrimPrefix(name, config.Prefix+"_")
	if dist >= 0 && dist <= max(2, len(suffix)/3) {
		msg += "; did you mean " + best + "?"
	}
	return msg
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// isTrue reports whether s is a true boolean as strconv.ParseBool reads it.
func isTrue(s string) bool {
	b, _ := strconv.ParseBool(s)
	return b
}
