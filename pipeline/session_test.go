package pipeline

import "github.com/streamproc/processor/txn"

// The session the processor runs on is both what the loop needs and what
// status, health and lag read.
var (
	_ Session  = (*txn.Session)(nil)
	_ Observer = (*txn.Session)(nil)
)
