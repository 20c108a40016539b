// Package statewindow covers windowed state: window counts through
// crashes, expiry bounding the store, stream-time expiry keeping up with a
// backlog. It runs against an embedded kfake cluster that each test starts
// and, when PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as
// well (see package itest).
package statewindow

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
