package check

import (
	"testing"

	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/record"
)

// The auditor spells the sink's default table names and the processor's
// header names itself, so as not to link them: they must stay what the
// processor writes.
func TestNamesMatchTheProcessor(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"DefaultTable", DefaultTable, pgsink.DefaultTable},
		{"DefaultOffsetsTable", DefaultOffsetsTable, pgsink.DefaultOffsetsTable},
		{"HeaderSource", record.HeaderSource, record.HeaderSource},
		{"HeaderSourceTopic", record.HeaderSourceTopic, record.HeaderSourceTopic},
		{"HeaderSourcePartition", record.HeaderSourcePartition, record.HeaderSourcePartition},
		{"HeaderSourceOffset", record.HeaderSourceOffset, record.HeaderSourceOffset},
		{"HeaderError", record.HeaderError, record.HeaderError},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, the processor's is %q", c.name, c.got, c.want)
		}
	}
}
