// Package bench holds BenchmarkCopy: the processor's copy loop beside a
// bare franz-go copier, over the same backlog. It runs against an embedded
// kfake cluster that each test starts and, when PROCESSOR_TEST_BROKERS is
// set, a real Apache Kafka cluster as well (see package itest).
package bench

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
