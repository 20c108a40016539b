// Package windowed covers windows closing under kills and backlogs,
// WebAssembly windows, and repartitioning through a repartition topic. It
// runs against an embedded kfake cluster that each test starts and, when
// PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as well (see
// package itest).
package windowed

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
