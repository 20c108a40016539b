package app

import (
	"runtime/debug"
	"testing"
)

func TestVersionFrom(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "bf15f5fe5e0c0123456789abcdef0123456789ab"
	for _, c := range []struct {
		name, set string
		bi        *debug.BuildInfo
		want      string
	}{
		{"set by make build", "v0.5.0-dev+bf15f5fe5e0c", &debug.BuildInfo{Settings: vcs(rev, "true")}, "v0.5.0-dev+bf15f5fe5e0c"},
		{"go install @version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0"},
		{"go build in a checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "devel+bf15f5fe5e0c"},
		{"go build, modified", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "devel+bf15f5fe5e0c.dirty"},
		{"no vcs", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"no build info", "", nil, "devel"},
	} {
		if got := versionFrom(c.set, c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
