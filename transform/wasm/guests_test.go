package wasm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/streamproc/processor/internal/testkit/wasmtest"
)

// Guests are built from Go sources with the Go toolchain the tests run
// under, once per test binary, into a temporary directory: the tests need
// nothing but Go. Each is compiled ahead, outside the race detector, into
// testCache (see package wasmtest), which every transform of the tests
// shares, those built through the registry (New) included.
var (
	guestDir   string
	guestMu    sync.Mutex
	guestBuilt = map[string]*guestBuild{}
	guestCache *wasmtest.Cache
	testCache  wazero.CompilationCache
)

type guestBuild struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasm-guests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	guestDir = dir
	if guestCache, err = wasmtest.NewCache(filepath.Join(dir, "cache")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testCache = guestCache.CompilationCache()
	newCache = testCache
	code := m.Run()
	testCache.Close(context.Background())
	os.RemoveAll(dir)
	os.Exit(code)
}

// guestPath builds the Go guest in directory pkg (relative to this
// package, e.g. "testdata/misbehave" or "../../examples/wasm/uppercase")
// as a WASI reactor and returns the module's path.
func guestPath(tb testing.TB, pkg string) string {
	tb.Helper()
	return guestPathWith(tb, pkg, "-buildmode=c-shared")
}

// guestPathWith builds pkg with extra go build flags, and compiles it
// into testCache for a call timeout; uppercase and stateful without one
// as well (TestCallTimeout, TestNoDeadline, the benchmarks and
// TestWasmStateFailedRecordWritesNothing run them so).
func guestPathWith(tb testing.TB, pkg string, flags ...string) string {
	tb.Helper()
	key := pkg + " " + strings.Join(flags, " ")
	guestMu.Lock()
	g, ok := guestBuilt[key]
	if !ok {
		g = &guestBuild{}
		guestBuilt[key] = g
	}
	n := len(guestBuilt)
	guestMu.Unlock()
	g.once.Do(func() {
		out := filepath.Join(guestDir, fmt.Sprintf("%s-%d.wasm", filepath.Base(pkg), n))
		if g.err = wasmtest.Build(pkg, out, flags...); g.err != nil {
			return
		}
		timeouts := []time.Duration{time.Second}
		if pkg == uppercase || pkg == stateful {
			timeouts = append(timeouts, 0)
		}
		g.path, g.err = out, guestCache.Precompile(out, timeouts...)
	})
	if g.err != nil {
		tb.Fatal(g.err)
	}
	return g.path
}
