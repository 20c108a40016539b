// Package budget covers the transaction budget and watchdog: transactions
// shortened under load, records alone over the budget dead-lettered,
// transaction timeouts and byte limits, shutdown while a produce is
// blocked. It runs against an embedded kfake cluster that each test starts
// and, when PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as
// well (see package itest).
package budget

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
