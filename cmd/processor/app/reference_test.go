package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/transform"
)

// The command line: no argument runs the processor; --help and config
// print every core variable and every registered transform's settings;
// anything else is a usage error (exit 2).
func TestRunCommand(t *testing.T) {
	if _, handled := runCommand(nil, transform.Default, &bytes.Buffer{}, &bytes.Buffer{}); handled {
		t.Error("no arguments was handled as a command")
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"config"}} {
		var out, errOut bytes.Buffer
		code, handled := runCommand(args, transform.Default, &out, &errOut)
		if !handled || code != 0 || errOut.Len() > 0 {
			t.Errorf("%q: code %d, handled %v, stderr %q", args, code, handled, errOut.String())
		}
		for _, v := range append(config.Vars(), "PROCESSOR_JQ_EXPR (required)", "PROCESSOR_HEADERS_SET", "Transform route: chooses") {
			if !strings.Contains(out.String(), v) {
				t.Errorf("%q does not print %q", args, v)
			}
		}
	}
	var out bytes.Buffer
	if code, _ := runCommand([]string{"config", "-markdown"}, transform.Default, &out, &bytes.Buffer{}); code != 0 ||
		out.String() != markdownReference(Plugins(transform.Default)) || !strings.Contains(out.String(), "| `PROCESSOR_ROUTE_DEFAULT` |") {
		t.Errorf("config -markdown: code %d, %d bytes", code, out.Len())
	}
	var metrics, metricsMD bytes.Buffer
	if code, handled := runCommand([]string{"metrics"}, transform.Default, &metrics, &bytes.Buffer{}); !handled || code != 0 ||
		!strings.Contains(metrics.String(), "processor_transactions_aborted_total{reason} (counter)") {
		t.Errorf("metrics: code %d, %q", code, metrics.String())
	}
	if code, _ := runCommand([]string{"metrics", "-markdown"}, transform.Default, &metricsMD, &bytes.Buffer{}); code != 0 ||
		!strings.Contains(metricsMD.String(), "| `processor_build_info` | gauge | `version`, `go_version` |") {
		t.Errorf("metrics -markdown: code %d, %q", code, metricsMD.String())
	}
	var ver bytes.Buffer
	if code, handled := runCommand([]string{"--version"}, transform.Default, &ver, &bytes.Buffer{}); !handled || code != 0 ||
		!strings.HasPrefix(ver.String(), "processor "+version()+" go1.") {
		t.Errorf("--version: code %d, %q", code, ver.String())
	}
	var errOut bytes.Buffer
	if code, handled := runCommand([]string{"conifg"}, transform.Default, &bytes.Buffer{}, &errOut); !handled || code != exitConfig ||
		!strings.Contains(errOut.String(), `unknown arguments ["conifg"]`) || !strings.Contains(errOut.String(), "usage:") {
		t.Errorf("a typo: code %d, stderr %q", code, errOut.String())
	}
}
