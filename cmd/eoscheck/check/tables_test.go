package check

import (
	"testing"

	"github.com/streamproc/processor/pgsink"
	"github.com/streamproc/processor/pipeline"
)

// The auditor spells the sink's default table names and the processor's
// header names itself, so as not to link them: they must stay what the
// processor writes.
func TestNamesMatchTheProcessor(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"DefaultTable", DefaultTable, pgsink.DefaultTable},
		{"DefaultOffsetsTable", DefaultOffsetsTable, pgsink.DefaultOffsetsTable},
		{"HeaderSource", HeaderSource, pipeline.HeaderSource},
		{"HeaderSourceTopic", HeaderSourceTopic, pipeline.HeaderSourceTopic},
		{"HeaderSourcePartition", HeaderSourcePartition, pipeline.HeaderSourcePartition},
		{"HeaderSourceOffset", HeaderSourceOffset, pipeline.HeaderSourceOffset},
		{"HeaderError", HeaderError, pipeline.HeaderError},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, the processor's is %q", c.name, c.got, c.want)
		}
	}
}
