// Package chaos holds the short chaos drills (make drill): processors
// killed and restarted while eoscheck audits the output, on Kafka and
// PostgreSQL. It runs against an embedded kfake cluster that each test
// starts and, when PROCESSOR_TEST_BROKERS is set, a real Apache Kafka
// cluster as well (see package itest).
package chaos

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
