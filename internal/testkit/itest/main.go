package itest

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// parallel is how many of a package's parallel tests run at once unless
// -parallel says otherwise: more than go test's default (GOMAXPROCS),
// because these tests mostly wait (on transaction and session timeouts,
// input fed at a pace, binaries starting), and each runs on a cluster of
// its own or on topics and groups of its own.
const parallel = 4

// Main runs the tests of an integration test package and exits: its
// TestMain calls it. It raises -parallel to parallel unless the command
// line set it, and afterwards removes what the tests built once for all
// of them: the commands (see Binary), then whatever cleanup removes (a
// package's own builds, such as a WebAssembly plugin).
func Main(m *testing.M, cleanup ...func()) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(parallel, runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	if BinDir != "" {
		os.RemoveAll(BinDir)
	}
	for _, c := range cleanup {
		c()
	}
	os.Exit(code)
}
