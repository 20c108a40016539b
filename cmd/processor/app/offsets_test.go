package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/streamproc/processor/transform"
)

// TestOffsetsCommandLine: mistakes of the command line exit 2 with one
// line naming them and the usage, before anything connects; -h prints
// the usage and exits 0.
func TestOffsetsCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"offsets", "-h"}, 0, "usage: processor offsets"},
		{[]string{"offsets", "reset"}, 2, "reset needs -to"},
		{[]string{"offsets", "reset", "-to", "yesterday"}, 2, `-to "yesterday": want earliest, latest`},
		{[]string{"offsets", "reset", "-to", "5", "-partition", "1"}, 2, "-partition needs -topic"},
		{[]string{"offsets", "-to", "5"}, 2, "flag provided but not defined: -to"},
		{[]string{"offsets", "extra"}, 2, "unexpected arguments"},
	} {
		var out, errb bytes.Buffer
		code, handled := runCommand(tc.args, transform.Default, &out, &errb)
		if !handled || code != tc.code || !strings.Contains(errb.String(), tc.says) {
			t.Errorf("%v: exit %d (handled %v), stderr %q; want exit %d saying %q", tc.args, code, handled, errb.String(), tc.code, tc.says)
		}
	}
}
