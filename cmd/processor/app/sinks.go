package app

// The destinations built into the processor, besides Kafka: each
// registers itself with sink.Default from init.
import _ "github.com/streamproc/processor/pgsink"
