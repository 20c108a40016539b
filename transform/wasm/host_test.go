package wasm

import (
	"context"
	"errors"
	"testing"
)

// A host function called outside the host's calls (from a guest's start
// function, where no record is being processed) panics with ErrBadCall
// naming itself, which traps the guest, before it reads its arguments.
func TestHostCallOutsideCalls(t *testing.T) {
	for _, h := range hostFuncs {
		func() {
			defer func() {
				err, _ := recover().(error)
				want := HostModule + "." + h.name + " called outside the host's calls"
				if !errors.Is(err, ErrBadCall) || err.Error() != ErrBadCall.Error()+": "+want {
					t.Errorf("%s: panicked with %v, want ErrBadCall: %s", h.name, err, want)
				}
			}()
			h.fn(context.Background(), nil, make([]uint64, len(h.params)+len(h.results)))
		}()
	}
}
