// Package all registers every built-in transform: a binary that imports it
// for its side effect knows each package under transform/ that registers
// one (`processor config` lists them). It is the one list of them; a new
// built-in transform is one package under transform/ and one import here,
// and this package's tests fail until the import is added.
//
//	import _ "github.com/streamproc/processor/transform/all"
package all

import (
	// Each registers itself in transform.Default from init.
	_ "github.com/streamproc/processor/transform/aggregate"
	_ "github.com/streamproc/processor/transform/dedupe"
	_ "github.com/streamproc/processor/transform/headers"
	_ "github.com/streamproc/processor/transform/httpcall"
	_ "github.com/streamproc/processor/transform/identity"
	_ "github.com/streamproc/processor/transform/join"
	_ "github.com/streamproc/processor/transform/jq"
	_ "github.com/streamproc/processor/transform/route"
	_ "github.com/streamproc/processor/transform/wasm"
)
