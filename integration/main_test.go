package integration

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// parallel is how many of the package's parallel tests run at once unless
// -parallel says otherwise: more than go test's default (GOMAXPROCS),
// because these tests mostly wait (on transaction and session timeouts,
// input fed at a pace, binaries starting), and each runs on a cluster of
// its own or on topics and groups of its own.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(parallel, runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	// What the tests built once for all of them: the commands, and the
	// WebAssembly plugin with its compilation cache.
	if BinDir != "" {
		os.RemoveAll(BinDir)
	}
	if wasmPath != "" {
		os.RemoveAll(filepath.Dir(wasmPath))
	}
	os.Exit(code)
}
