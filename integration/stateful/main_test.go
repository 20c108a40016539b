// Package stateful covers stateful transforms: counts and dedupe through
// crashes and restores, the state directory, failed records, key forms,
// and WebAssembly state. It runs against an embedded kfake cluster that
// each test starts and, when PROCESSOR_TEST_BROKERS is set, a real Apache
// Kafka cluster as well (see package itest).
package stateful

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
