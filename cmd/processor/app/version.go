package app

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the processor's version. Builds set it with
//
//	go build -ldflags "-X github.com/streamproc/processor/cmd/processor/app.Version=v1.2.3"
//
// (the Makefile does, from git describe); otherwise it is the main
// module's version when built with go install, or "devel".
var Version string

// version returns Version, or the best the binary knows about itself.
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// registerBuildInfo registers processor_build_info{version,go_version} 1.
func registerBuildInfo(reg prometheus.Registerer) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "processor",
		Name:      "build_info",
		Help:      "Always 1; its labels name the processor's version and the Go version it was built with.",
	}, []string{"version", "go_version"})
	g.WithLabelValues(version(), runtime.Version()).Set(1)
	reg.MustRegister(g)
}
