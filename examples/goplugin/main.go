// Command goplugin is a processor binary with a compiled-in transform
// plugin: it blank-imports the plugin package (examples/goplugin/redact)
// next to the built-in transforms (transform/all), whose init functions register them in
// transform.Default, and runs the processor exactly as cmd/processor does.
// See README.md beside this file.
//
//	go build -o bin/processor-redact ./examples/goplugin
//	PROCESSOR_TRANSFORMS=redact PROCESSOR_REDACT_FIELDS=card_number,email ... bin/processor-redact
package main

import (
	"os"

	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/transform"

	// The plugin.
	_ "github.com/streamproc/processor/examples/goplugin/redact"

	// The built-in transforms, as in cmd/processor. To keep only some,
	// import their packages (transform/jq, ...) instead.
	_ "github.com/streamproc/processor/transform/all"
)

func main() { os.Exit(app.Main(transform.Default)) }
