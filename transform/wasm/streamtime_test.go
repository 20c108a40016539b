package wasm

import (
	"context"
	"testing"

	"github.com/streamproc/processor/transform"
)

// timedStores are memStores that give a stream time, as the processor's
// do.
type timedStores struct {
	*memStores
	ms int64
}

func (s *timedStores) StreamTime() (int64, bool) { return s.ms, true }

// processor.stream_time gives a module the record's stream time, and -1
// (none) where the processor keeps none.
func TestWasmStreamTime(t *testing.T) {
	tr := newTest(t, stateful, withStores("s0"))
	st := &timedStores{memStores: newStores("s0"), ms: 1_700_000_123_456}
	out, err := tr.Process(transform.WithStores(context.Background(), st), testSrc, keyed("k", "time"), nil)
	if err != nil || len(out) != 1 || string(out[0].Value) != "1700000123456" {
		t.Fatalf("with a stream time: %d outputs, %v", len(out), err)
	}
	out, err = tr.Process(newStores("s0").ctx(), testSrc, keyed("k", "time"), nil)
	if err != nil || len(out) != 1 || string(out[0].Value) != "none" {
		t.Fatalf("without one: %d outputs, %v", len(out), err)
	}
}
