// Command processor is the exactly-once stream processor: it reads its input
// topics with read_committed isolation, runs every record through the
// transform chain, and commits the outputs together with the consumed
// offsets in one Kafka transaction. It is configured by PROCESSOR_*
// environment variables; see the README and docs/running.md.
//
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.
package main

import (
	"os"

	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/all" // the built-in transforms
)

func main() { os.Exit(app.Main(transform.Default)) }
