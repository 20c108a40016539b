// Package lag holds the integration tests of what the processor reports
// about its position: consumer lag and unstable records against Kafka's
// own kafka-consumer-groups, transaction markers in its input, the
// pending offsets of a dead transaction. It runs against an embedded
// kfake cluster that each test starts and, when PROCESSOR_TEST_BROKERS is
// set, a real Apache Kafka cluster as well (see package itest).
package lag

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
