package wasm

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/streamproc/processor/transform"
)

// hostStreamTime is processor.stream_time (ABI.md, "Stream time"): the
// stream time of the record being processed (transform.StreamMillisOf),
// in Unix milliseconds, or -1 when none is known (no record is being
// processed, or the processor keeps none).
func hostStreamTime(ctx context.Context, _ api.Module, stack []uint64) {
	hs := hostOf(ctx, "stream_time")
	ms, ok := int64(-1), false
	if hs.rctx != nil {
		ms, ok = transform.StreamMillisOf(hs.rctx)
	}
	if !ok {
		ms = -1
	}
	stack[0] = uint64(ms)
}
