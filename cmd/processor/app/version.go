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
// `make build` and the image do, from scripts/version.sh: v<VERSION> on
// the commit tagged so, v<VERSION>-dev+<commit>[.dirty] on any other,
// v<VERSION>-dev without git (docs/running.md). When it is not set, see
// version.
var Version string

// version returns Version, or the best the binary knows about itself.
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(Version, bi)
}

// versionFrom returns set when it is not empty; else the main module's
// version (go install ...@v1.2.3); else "devel", followed by
// +<commit>[.dirty] when the go command recorded the commit (a plain go
// build in a git checkout), so that a build is still named.
func versionFrom(set string, bi *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if bi == nil {
		return "devel"
	}
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	v, rev, dirty := "devel", "", ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = ".dirty"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += "+" + rev + dirty
	}
	return v
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
