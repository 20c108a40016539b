package wasm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
)

// Guests are built from Go sources with the Go toolchain the tests run
// under, once per test binary, into a temporary directory: the tests need
// nothing but Go.
var (
	guestDir   string
	guestMu    sync.Mutex
	guestBuilt = map[string]*guestBuild{}
	// testCache compiles each guest once across the tests' transforms.
	testCache = wazero.NewCompilationCache()
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
	code := m.Run()
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

// guestPathWith builds pkg with extra go build flags.
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
		g.path, g.err = out, buildGuest(pkg, out, flags...)
	})
	if g.err != nil {
		tb.Fatal(g.err)
	}
	return g.path
}

// buildGuest runs GOOS=wasip1 GOARCH=wasm go build on pkg.
func buildGuest(pkg, out string, flags ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command(goBin, append(args, "./"+filepath.ToSlash(filepath.Clean(pkg)))...)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building guest %s: %v\n%s", pkg, err, b)
	}
	return nil
}
