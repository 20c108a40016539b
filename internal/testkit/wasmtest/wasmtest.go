// Package wasmtest builds the Go WebAssembly guests that tests run, and
// compiles them ahead into a wazero compilation cache the tests share.
//
// Compiling a Go guest (a module of 2-3 MB) to machine code takes wazero
// about 1.5 s, but 30 to 50 s when wazero itself is built with the race
// detector, as it is under go test -race. So the guests are compiled by a
// helper built without it (./precompile, which calls the wasm transform's
// own constructor, so the code is compiled with the transform's runtime
// configuration), into a cache directory; the transforms of the tests,
// given the same cache, find each module there and load it instead of
// compiling it again. Everything the tests run, the host code and the
// guests' instantiation and calls, still runs under the race detector.
package wasmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
)

// buildTimeout bounds one go build (a guest or the helper): a toolchain
// that hangs fails the test with a message, not at go test's timeout.
const buildTimeout = 5 * time.Minute

// helperPkg is the import path of the precompiling helper.
const helperPkg = "github.com/streamproc/processor/internal/testkit/wasmtest/precompile"

// versionVar is the variable wazero reads its version from before its
// build information, and keys its cache directory and entries by.
const versionVar = "github.com/tetratelabs/wazero/internal/version.version"

// wazeroVersion returns the version wazero finds for itself in this
// process, as its internal/version package finds it: a go test binary
// records no module versions, so there it is "dev", while a helper built
// with go build would say "v1.12.0" and use another cache directory. The
// helper is linked with this one instead.
func wazeroVersion() string {
	const dflt = "dev"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return dflt
	}
	v := ""
	for _, dep := range info.Deps {
		if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
			v = dep.Version
		}
	}
	if v == "" || v == "(devel)" {
		v = info.Main.Version
	}
	if v == "" || v == "(devel)" {
		return dflt
	}
	return v
}

// goTool returns the go command of the toolchain running the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// run runs the go command with args (and env added to the test's), within
// buildTimeout, and returns an error quoting its output if it fails.
func run(env []string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("go %s did not finish within %s, killed: %w\n%s", strings.Join(args, " "), buildTimeout, err, out)
	case err != nil:
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Build runs GOOS=wasip1 GOARCH=wasm go build with flags on the Go
// package in directory pkg (relative to the working directory, a test's
// package directory), writing the module to out. A reactor, which the
// wasm transform loads, needs the flag -buildmode=c-shared.
func Build(pkg, out string, flags ...string) error {
	args := append(append([]string{"build", "-o", out}, flags...), "./"+filepath.ToSlash(filepath.Clean(pkg)))
	if err := run([]string{"GOOS=wasip1", "GOARCH=wasm"}, args...); err != nil {
		return fmt.Errorf("building guest %s: %w", pkg, err)
	}
	return nil
}

// Cache is a wazero compilation cache kept in a directory, into which
// Precompile compiles modules ahead. Give its CompilationCache to the
// transforms under test (wasm.NewWithCache); close that after them.
type Cache struct {
	cc  wazero.CompilationCache
	dir string

	once   sync.Once
	helper string // the precompiling helper's binary, built once
	err    error
}

// NewCache returns a cache in dir, created if need be; the caller removes
// it.
func NewCache(dir string) (*Cache, error) {
	cc, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("a wazero compilation cache in %s: %w", dir, err)
	}
	return &Cache{cc: cc, dir: dir}, nil
}

// CompilationCache returns the wazero cache on the directory. wazero
// accepts only the caches it made, so it is this value, not the Cache,
// that a runtime configuration takes.
func (c *Cache) CompilationCache() wazero.CompilationCache { return c.cc }

// Precompile compiles the module file once for each of the call
// timeouts given (PROCESSOR_WASM_TIMEOUT; 0 turns the deadline off, which
// wazero compiles differently), with the wasm transform's configuration,
// into the cache's directory, in a process built without the race
// detector. The helper is built on the first call. A module the transform
// refuses once compiled (a WASI command, another ABI version) is compiled
// all the same; one that does not compile is left to the test to find.
func (c *Cache) Precompile(module string, timeouts ...time.Duration) error {
	c.once.Do(func() {
		c.helper = filepath.Join(c.dir, "precompile")
		if runtime.GOOS == "windows" {
			c.helper += ".exe"
		}
		c.err = run(nil, "build", "-ldflags=-X "+versionVar+"="+wazeroVersion(), "-o", c.helper, helperPkg)
	})
	if c.err != nil {
		return fmt.Errorf("building the precompiling helper: %w", c.err)
	}
	args := []string{"-dir", c.dir}
	for _, d := range timeouts {
		args = append(args, "-timeout", d.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.helper, append(args, module)...)
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("precompiling %s: %w\n%s", module, err, out)
	}
	return nil
}
