// Package dbsink covers the PostgreSQL sink: rows and offsets in one
// database transaction, refused statements, outages, slow statements, end-
// to-end latency. It runs against an embedded kfake cluster that each test
// starts and, when PROCESSOR_TEST_BROKERS is set, a real Apache Kafka
// cluster as well (see package itest).
package dbsink

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
