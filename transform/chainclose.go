package transform

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Emitter returns the stage whose store is store when it emits on
// close (WindowEmitter), and its position in the chain.
func (c *Chain) Emitter(store string) (w WindowEmitter, stage int, ok bool) {
	for i, s := range c.stages {
		if w, ok := s.t.(WindowEmitter); ok && w.EmitsOnClose(store) {
			for _, n := range w.Stores() {
				if n == store {
					return w, i, true
				}
			}
		}
	}
	return nil, 0, false
}

// Closed runs a closed entry through the stage that emits it (Emitter)
// and the stages after it, and appends the final outputs to out, as
// Process does for an input record; from is the input the outputs'
// lineage names (WindowEmitter), its Offset -1 when none. A failing
// stage fails it with an *Error naming the stage; out is then returned
// as it was given.
func (c *Chain) Closed(ctx context.Context, cl Closing, out []*kgo.Record) (res []*kgo.Record, from Source, err error) {
	n := len(out)
	from = Source{Topic: cl.Topic, Partition: cl.Partition, Offset: -1}
	w, at, ok := c.Emitter(cl.Store)
	if !ok {
		return out, from, fmt.Errorf("no stage of the chain emits the entries of store %s", cl.Store)
	}
	cur := &c.stages[at]
	defer func() {
		if v := recover(); v != nil {
			res, err = out[:n], &Error{Stage: cur.name, Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	in, src, err := w.Closed(ctx, cl, nil)
	if err != nil {
		return out[:n], from, c.stageError(cur, err)
	}
	if src.Topic != "" {
		from = src
	}
	for i := at + 1; i < len(c.stages); i++ {
		cur = &c.stages[i]
		var next []*kgo.Record
		var total int64
		for _, r := range in {
			done := len(next)
			if next, err = cur.t.Process(ctx, from, r, next); err == nil {
				total, err = c.measure(next[done:], total, len(next))
			}
			if err != nil {
				return out[:n], from, c.stageError(cur, err)
			}
		}
		in = next
	}
	return append(out, in...), from, nil
}

// checkEmitter refuses a stage that keeps state after one that emits on
// close: the closed entries' records run through the later stages in the
// processor's loop, where no store is open to them.
func (c *Chain) checkEmitter(e Entry, t Transform) error {
	if len(StoresOf(t)) == 0 {
		return nil
	}
	for _, s := range c.stages[:len(c.stages)-1] {
		if EmitsOnClose(s.t) {
			return fmt.Errorf("transform %s keeps state after %s, which emits when its windows close (EMIT=close); put it before, or in another processor", e, s.name)
		}
	}
	return nil
}

// EmitterFrom returns the first entry at or after stage at that emits
// when entries of its stores close (WindowEmitter).
func (c *Chain) EmitterFrom(at int) (e Entry, ok bool) {
	for _, s := range c.stages[min(max(at, 0), len(c.stages)):] {
		if !s.host && EmitsOnClose(s.t) {
			return s.entry, true
		}
	}
	return Entry{}, false
}

// CloseSettingFrom returns the setting that makes the first entry at or
// after stage at that emits on close (EmitterFrom) do so, and its value:
// its own (CloseSetter, own true), or EMIT=close.
func (c *Chain) CloseSettingFrom(at int) (name, value string, own bool) {
	for _, s := range c.stages[min(max(at, 0), len(c.stages)):] {
		if !s.host && EmitsOnClose(s.t) {
			if cs, ok := s.t.(CloseSetter); ok {
				name, value = cs.CloseSetting()
				return name, value, true
			}
			break
		}
	}
	return "EMIT", "close", false
}
