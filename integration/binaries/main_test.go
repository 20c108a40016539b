// Package binaries runs the built commands: the processor binary's
// configuration errors and exit codes, client settings, offsets and
// replay, the status page, the examples, and secured clusters (TLS, SASL,
// OAUTHBEARER). It runs against an embedded kfake cluster that each test
// starts and, when PROCESSOR_TEST_BROKERS is set, a real Apache Kafka
// cluster as well (see package itest).
package binaries

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
