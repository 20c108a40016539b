package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/all"
)

// The wiring reads each entry's settings from PROCESSOR_<NAME>_<SETTING>,
// or PROCESSOR_<NAME>_<ALIAS>_<SETTING> for an aliased entry, and turns a
// transform's setting error into a one-line *settings.Error naming the
// variable, with the other settings its message names shown as variables
// of the same entry.
func TestBuildChainNamesVariables(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		chain   []string
		wantVar string
		want    string
	}{
		{map[string]string{"PROCESSOR_JQ_EXPR": ".", "PROCESSOR_JQ_SECOND_EXPR": ".a |"}, []string{"jq", "jq@second"},
			"PROCESSOR_JQ_SECOND_EXPR", `transform jq@second: PROCESSOR_JQ_SECOND_EXPR=".a |" is invalid: want a jq program such as`},
		{map[string]string{"PROCESSOR_JQ_EXPR": ".", "PROCESSOR_JQ_FAST": "maybe"}, []string{"jq"},
			"PROCESSOR_JQ_FAST", `transform jq: PROCESSOR_JQ_FAST="maybe" is invalid: want true or false`},
		{map[string]string{"PROCESSOR_JQ_EXPR": "."}, []string{"jq@other"},
			"PROCESSOR_JQ_OTHER_EXPR", "transform jq@other: PROCESSOR_JQ_OTHER_EXPR is not set: want a jq program"},
		{map[string]string{"PROCESSOR_ROUTE_R2_EXPR": ".a", "PROCESSOR_ROUTE_R2_HEADER": "h"}, []string{"route@r2"},
			"PROCESSOR_ROUTE_R2_HEADER", `PROCESSOR_ROUTE_R2_HEADER="h" is invalid: want unset while PROCESSOR_ROUTE_R2_EXPR is set`},
		{nil, []string{"route"},
			"PROCESSOR_ROUTE_EXPR", "PROCESSOR_ROUTE_EXPR is not set: want a jq program whose first result is a topic name, e.g. \"orders-\" + .region; or set PROCESSOR_ROUTE_HEADER to route"},
		{map[string]string{"PROCESSOR_HEADERS_SET": "a=1", "PROCESSOR_HEADERS_REMOVE": "a"}, []string{"headers"},
			"PROCESSOR_HEADERS_REMOVE", `and none also in PROCESSOR_HEADERS_SET ("a" is in both)`},
	} {
		t.Run(c.wantVar, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v) // restored when the subtest ends
			}
			_, err := buildChain(transform.Default, c.chain)
			var cerr *settings.Error
			if !errors.As(err, &cerr) || cerr.Var != c.wantVar || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v %v: got %v, want a one-line *settings.Error for %s containing %q", c.chain, c.env, err, c.wantVar, c.want)
			}
		})
	}
	if _, err := buildChain(transform.Default, []string{"nope"}); err == nil || !strings.Contains(err.Error(), "PROCESSOR_TRANSFORMS") {
		t.Errorf("unknown transform: %v", err)
	}
}
