// Command precompile compiles WebAssembly modules as the wasm transform
// compiles them into a wazero compilation cache directory, so that tests
// under the race detector load them from there instead of compiling them
// (see package wasmtest). It is built and run by wasmtest, not installed.
//
//	precompile -dir <cache> [-timeout 1s]... module.wasm...
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform/wasm"
)

// durations is a repeatable duration flag.
type durations []time.Duration

func (d *durations) String() string { return fmt.Sprint(*d) }

func (d *durations) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a Go duration: %w", err)
	}
	*d = append(*d, v)
	return nil
}

func main() {
	dir := flag.String("dir", "", "the compilation cache directory (required)")
	var timeouts durations
	flag.Var(&timeouts, "timeout", "a call timeout to compile for, as PROCESSOR_WASM_TIMEOUT (repeatable; 0 is no deadline; default 1s)")
	flag.Parse()
	if *dir == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: precompile -dir <cache> [-timeout 1s]... module.wasm...")
		os.Exit(2)
	}
	if len(timeouts) == 0 {
		timeouts = durations{time.Second}
	}
	if err := precompile(*dir, timeouts, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "precompile:", err)
		os.Exit(1)
	}
}

// precompile builds a transform of every module with every timeout, in
// parallel, on one cache in dir, and closes them: the compiled code stays
// in dir. A transform's settings error is no failure: the transform
// compiles a module before it checks its exports and starts it, and a
// module that does not compile is the test's to find, not the helper's.
func precompile(dir string, timeouts []time.Duration, modules []string) error {
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return fmt.Errorf("opening the cache in %s: %w", dir, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(modules)*len(timeouts))
	for i, m := range modules {
		for j, d := range timeouts {
			wg.Go(func() {
				tr, err := wasm.NewWithCache(&wasm.Settings{Module: m, MaxMemory: 64 << 20, Timeout: d}, cache)
				var se *settings.Error
				switch {
				case err == nil:
					err = tr.Close()
				case errors.As(err, &se):
					err = nil
				}
				if err != nil {
					errs[i*len(timeouts)+j] = fmt.Errorf("%s (timeout %s): %w", m, d, err)
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}
