// Package eos covers exactly-once delivery: instances stopped, fenced and
// rebalanced, aborted transactions and injected protocol errors, a
// WebAssembly plugin, a broker cluster killed and restarted. It runs
// against an embedded kfake cluster that each test starts and, when
// PROCESSOR_TEST_BROKERS is set, a real Apache Kafka cluster as well (see
// package itest).
package eos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"
)

func TestMain(m *testing.M) {
	itest.Main(m, func() {
		if wasmPath != "" {
			os.RemoveAll(filepath.Dir(wasmPath)) // the plugin and its compilation cache
		}
	})
}
