package itest

import (
	"github.com/streamproc/processor/internal/launch"
)

// DeadLettered runs the stateful binary with the dead-letter policy.
func DeadLettered(dlq string) func(*launch.Instance) {
	return func(inst *launch.Instance) { inst.OnError, inst.DLQTopic = "dlq", dlq }
}
