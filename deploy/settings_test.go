package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/transform"
	// The built-in transforms, as cmd/processor/main.go imports them, so
	// that their settings are known.
	_ "github.com/streamproc/processor/transform/all"
)

// The processor's command and its HTTP wiring, relative to this package.
const (
	processorPkg = "../cmd/processor"
	appDir       = "../cmd/processor/app"
)

// envSet is the environment one processor instance gets from a manifest:
// variable to value, and variable to the file (and place in it) that sets
// it, for messages. A value that only exists at run time (a pod's name, a
// secret) is a stand-in.
type envSet struct {
	where string // e.g. "compose.yaml service processor-1"
	vars  map[string]string
	from  map[string]string
}

func newEnvSet(where string) envSet {
	return envSet{where: where, vars: map[string]string{}, from: map[string]string{}}
}

func (e envSet) set(name, value, from string) {
	e.vars[name] = value
	e.from[name] = from
}

// get returns the variable's value, or the default config.Reference
// gives, or "".
func (e envSet) get(name string) string {
	if v, ok := e.vars[name]; ok {
		return v
	}
	for _, v := range config.Reference() {
		if v.Name == name {
			return v.Default
		}
	}
	return ""
}

// transformVars returns, for each registered transform, its settings'
// variables without an alias: PROCESSOR_<NAME>_<SETTING>.
func transformVars(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{} // variable -> transform
	for _, name := range transform.Default.Names() {
		spec, _ := transform.Default.Lookup(name)
		for _, f := range spec.Fields() {
			out[app.PluginVar(transform.Entry{Name: name}.Plugin(), f.Name)] = name
		}
	}
	if len(out) == 0 {
		t.Fatal("no transform declares a setting: are the built-in transforms imported?")
	}
	return out
}

// unknownVars returns the PROCESSOR_* variables of e that the processor
// does not read, each with where it is set, and the chain entries of
// PROCESSOR_TRANSFORMS that name no registered transform.
func unknownVars(t *testing.T, e envSet) []string {
	t.Helper()
	core := map[string]bool{}
	for _, v := range config.Vars() {
		core[v] = true
	}
	byTransform := transformVars(t)
	// Aliased settings: PROCESSOR_<NAME>_<ALIAS>_<SETTING> for each
	// name@alias of this instance's chain.
	var unknown []string
	for _, entry := range strings.Split(e.get(config.EnvName("TRANSFORMS")), ",") {
		name, alias, _ := strings.Cut(strings.TrimSpace(entry), "@")
		spec, ok := transform.Default.Lookup(name)
		if !ok {
			unknown = append(unknown, fmt.Sprintf("%s: PROCESSOR_TRANSFORMS entry %q: no such transform (registered: %s)",
				e.where, entry, strings.Join(transform.Default.Names(), ", ")))
			continue
		}
		if alias != "" {
			for _, f := range spec.Fields() {
				byTransform[app.PluginVar(transform.Entry{Name: name, Alias: alias}.Plugin(), f.Name)] = name
			}
		}
	}
	for name := range e.vars {
		if !strings.HasPrefix(name, config.Prefix+"_") || core[name] {
			continue
		}
		if _, ok := byTransform[name]; ok {
			continue
		}
		unknown = append(unknown, fmt.Sprintf("%s (%s)", name, e.from[name]))
	}
	sort.Strings(unknown)
	return unknown
}

// checkKnownVars fails, in one message listing them all, when manifests
// set PROCESSOR_* variables that the processor does not read.
func checkKnownVars(t *testing.T, sets []envSet) {
	t.Helper()
	if len(sets) == 0 {
		t.Fatal("no processor environment found")
	}
	var unknown []string
	for _, e := range sets {
		unknown = append(unknown, unknownVars(t, e)...)
	}
	sort.Strings(unknown)
	unknown = slices.Compact(unknown)
	if len(unknown) > 0 {
		t.Errorf("%d variables the processor does not read (not in config.Vars() nor a registered transform's settings):\n  %s",
			len(unknown), strings.Join(unknown, "\n  "))
	}
}

// checkConfigLoads runs config.Load, the processor's own validation, on
// the core variables of each set. (It reads no files: the TLS and SASL
// files are read when the processor starts.)
func checkConfigLoads(t *testing.T, sets []envSet) {
	t.Helper()
	core := config.Vars()
	for _, e := range sets {
		t.Run(e.where, func(t *testing.T) {
			for _, kv := range os.Environ() {
				if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, config.Prefix+"_") {
					t.Setenv(name, "") // restored after the test
					os.Unsetenv(name)
				}
			}
			for name, value := range e.vars {
				if slices.Contains(core, name) {
					t.Setenv(name, value)
				}
			}
			if _, err := config.Load("deploy-test"); err != nil {
				t.Errorf("%s: the processor would exit 2: %v", e.where, err)
			}
		})
	}
}

// httpPort returns the port of PROCESSOR_HTTP_ADDR in e, or of its
// default.
func httpPort(t *testing.T, e envSet) int {
	t.Helper()
	addr := e.get(config.EnvName("HTTP_ADDR"))
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: PROCESSOR_HTTP_ADDR %q: %v", e.where, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: PROCESSOR_HTTP_ADDR %q: port %q is not a number", e.where, addr, port)
	}
	return n
}

// defaultHTTPPort is the port of PROCESSOR_HTTP_ADDR's default.
func defaultHTTPPort(t *testing.T) int {
	t.Helper()
	return httpPort(t, newEnvSet("the default"))
}

// transactionTimeout returns PROCESSOR_TRANSACTION_TIMEOUT in e.
func transactionTimeout(t *testing.T, e envSet) time.Duration {
	t.Helper()
	v := e.get(config.EnvName("TRANSACTION_TIMEOUT"))
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: PROCESSOR_TRANSACTION_TIMEOUT %q: %v", e.where, v, err)
	}
	return d
}

// Bounds of the steps of a clean stop after SIGTERM, from the code:
// txn.closeTimeout (leaving the group; closing the client) and the HTTP
// server's shutdown in cmd/processor/app.
const (
	leaveGroupTimeout = 5 * time.Second
	closeClientTime   = 5 * time.Second
	httpShutdownTime  = 2 * time.Second
)

// cleanStopBound is the longest a clean stop can take with transaction
// timeout T (docs/design.md, SIGTERM): finishing the records already
// polled, which the pipeline gives up on one transaction budget (4/5 of T,
// app.Overrides' default) after the signal; committing the open
// transaction, bounded by T; leaving the group and closing the client;
// stopping the HTTP server. A grace period must be longer, or the
// processor may be killed mid-commit.
func cleanStopBound(txnTimeout time.Duration) time.Duration {
	return txnTimeout*4/5 + txnTimeout + leaveGroupTimeout + closeClientTime + httpShutdownTime
}

// servedPaths returns the paths cmd/processor/app registers on its HTTP
// mux (mux.Handle and mux.HandleFunc with a literal pattern).
func servedPaths(t *testing.T) map[string]bool {
	t.Helper()
	paths := map[string]bool{}
	inspectApp(t, token.NewFileSet(), func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if p, err := strconv.Unquote(lit.Value); err == nil {
				paths[p] = true
			}
		}
		return true
	})
	for _, want := range []string{"/healthz", "/readyz", "/metrics"} {
		if !paths[want] {
			t.Fatalf("%s does not serve %s (found %v): the deployment files and this test need updating", appDir, want, paths)
		}
	}
	return paths
}

// inspectApp parses the Go files of appDir, tests left out, into fset and
// walks each with fn, as ast.Inspect does.
func inspectApp(t *testing.T, fset *token.FileSet, fn func(ast.Node) bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(appDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, fn)
	}
}

// parseBytes reads a Kubernetes memory quantity (512Mi, 1Gi, 500M) or a
// GOMEMLIMIT value (400MiB, 1GiB, a plain number of bytes).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1},
	}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

func TestCleanStopBound(t *testing.T) {
	// The README's and docs/deploy.md's figure for the default timeout.
	if got, want := cleanStopBound(40*time.Second), 84*time.Second; got != want {
		t.Errorf("cleanStopBound(40s) = %s, want %s", got, want)
	}
}
