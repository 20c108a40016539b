// Package schemas covers Schema Registry formats: Avro, Protobuf and JSON
// Schema in and out, evolution, subject strategies, interoperability with
// Confluent's clients, registry faults, and the Avro example. It runs
// against an embedded kfake cluster that each test starts and, when
// PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as well (see
// package itest).
package schemas

import (
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m)
}
