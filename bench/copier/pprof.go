//go:build pprof

package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the profiles, on http.DefaultServeMux
	"os"
)

// With the build tag pprof (go build -tags pprof ./bench/copier), the
// flag -pprof host:port serves Go's profiles under /debug/pprof/, as the
// processor's PROCESSOR_PPROF does, so that the two can be profiled over
// the same drain (docs/benchmarks.md). Without the tag the copier that
// make bench measures carries none of it.
func init() {
	addr := flag.String("pprof", "", "serve net/http/pprof on this host:port (build tag pprof)")
	startHooks = append(startHooks, func() {
		if *addr == "" {
			return
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "copier: -pprof:", err)
			os.Exit(2)
		}
		go func() { _ = http.Serve(ln, nil) }()
	})
}
