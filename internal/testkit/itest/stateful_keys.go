package itest

import (
	"testing"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// AuditRun reads a finished run with eoscheck's reader and checker, with
// the aggregate check when aggregate, and fails the test on any anomaly.
func (tg *Target) AuditRun(t *testing.T, group, in, out string, opts check.Options) check.Report {
	t.Helper()
	return tg.AuditWith(t, check.Source{Inputs: []string{in}, Outputs: []string{out}, Group: group, Aggregate: opts.Aggregate}, opts)
}
