// Package faults covers failures while running: crashes and crash loops,
// error policies and dead letters, deleted and forbidden topics, size
// limits, lineage headers, stopping. It runs against an embedded kfake
// cluster that each test starts and, when PROCESSOR_TEST_BROKERS is set, a
// real Apache Kafka cluster as well (see package itest).
package faults

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
