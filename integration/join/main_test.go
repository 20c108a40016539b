// Package join holds the integration tests of the join transform: orders
// enriched from a compacted table topic through crashes, restarts, a
// wiped state directory and rebalances, judged against the table as it
// stood, and the settings it refuses; and the same of a WebAssembly
// plugin that reads a table (PROCESSOR_WASM_TABLES). It runs against an
// embedded kfake cluster that each test starts and, when
// PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as well (see
// package itest).
package join

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
